"""The ordinary install of the binding, offline: python/pyproject.toml builds with the system's
setuptools and wheel (Debian 12: python3-venv, python3-setuptools, python3-wheel) through
`pip install --no-build-isolation --no-index` into a venv, and the installed package imports and
finds the library through MLATUNE_LIBRARY. Its version is the project's. Usage:
test_pip_install.py WORK_DIR. MLATUNE_LIBRARY names the build tree's libmlatune."""

import os
import re
import shutil
import subprocess
import sys
import unittest

from binding_test_util import SOURCE_DIR, clean_env, loader_finds_the_soname

WORK_DIR = sys.argv.pop(1)
BUILD_LIBRARY = os.environ["MLATUNE_LIBRARY"]
NEEDS = "needs the Debian packages python3-venv, python3-setuptools and python3-wheel"


def project_version():
    with open(os.path.join(SOURCE_DIR, "CMakeLists.txt")) as f:
        return re.search(r"^project\(mlatune VERSION ([0-9.]+)", f.read(), re.M).group(1)


class PipInstallTest(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        shutil.rmtree(WORK_DIR, ignore_errors=True)
        os.makedirs(WORK_DIR)
        # A copy: pip's in-tree build would leave build/ and *.egg-info in the source tree.
        source = os.path.join(WORK_DIR, "src")
        shutil.copytree(os.path.join(SOURCE_DIR, "python"), source,
                        ignore=shutil.ignore_patterns("__pycache__", "build", "*.egg-info"))
        venv = os.path.join(WORK_DIR, "venv")
        cls.python = os.path.join(venv, "bin", "python")
        env = dict(os.environ, PIP_DISABLE_PIP_VERSION_CHECK="1", PIP_NO_INPUT="1")
        steps = ([sys.executable, "-m", "venv", "--system-site-packages", venv],
                 [cls.python, "-m", "pip", "install", "--no-build-isolation", "--no-index",
                  source])
        for step in steps:
            result = subprocess.run(step, env=env, capture_output=True, text=True, timeout=300)
            if result.returncode != 0:
                raise AssertionError(f"{' '.join(step)} failed ({NEEDS}):\n{result.stdout}"
                                     f"{result.stderr}")
        cls.site_packages = subprocess.run(
            [cls.python, "-c", "import sysconfig; print(sysconfig.get_path('purelib'))"],
            check=True, capture_output=True, text=True).stdout.strip()

    def run_venv(self, code, **env):
        return subprocess.run([self.python, "-c", code], env=clean_env(**env), cwd=WORK_DIR,
                              capture_output=True, text=True, timeout=120)

    def test_pyproject_version_is_the_projects(self):
        with open(os.path.join(SOURCE_DIR, "python", "pyproject.toml")) as f:
            declared = re.search(r'^version = "([^"]+)"', f.read(), re.M).group(1)
        self.assertEqual(declared, project_version())

    def test_installed_package_imports_and_finds_the_library(self):
        result = self.run_venv("import importlib.metadata, mlatune\n"
                               "print(mlatune.__file__)\n"
                               "print(mlatune.library_path())\n"
                               "print(mlatune.version())\n"
                               "print(importlib.metadata.version('mlatune'))\n",
                               MLATUNE_LIBRARY=BUILD_LIBRARY)
        self.assertEqual(result.returncode, 0, result.stderr)
        package_file, loaded, library_version, package_version = result.stdout.split()
        self.assertEqual(package_file, os.path.join(self.site_packages, "mlatune",
                                                    "__init__.py"))
        self.assertEqual(loaded, BUILD_LIBRARY)
        self.assertEqual(library_version, project_version())
        self.assertEqual(package_version, project_version())
        # Only the two modules: the install layout is cmake --install's alone.
        self.assertEqual(sorted(f for f in os.listdir(os.path.dirname(package_file))
                                if f.endswith(".py")), ["__init__.py", "_checks.py"])

    def test_without_a_library_the_import_says_how_to_fix_it(self):
        if loader_finds_the_soname():
            self.skipTest("libmlatune.so.0 is on this machine's default loader path")
        result = self.run_venv("import mlatune")
        self.assertNotEqual(result.returncode, 0)
        self.assertIn("LibraryNotFoundError", result.stderr)
        self.assertIn("set MLATUNE_LIBRARY=/path/to/libmlatune.so.0", result.stderr)


if __name__ == "__main__":
    unittest.main(verbosity=2)
