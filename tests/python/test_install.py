"""`cmake --install` of the Python binding (component Python) next to the library (Runtime), and
how the package finds libmlatune: $MLATUNE_LIBRARY first (and only it, when set), then the library
of the prefix it was installed into (through a relative path, so a moved prefix still works),
then the dynamic loader's search; when none loads, LibraryNotFoundError (an ImportError) says how
to fix it. Usage: test_install.py CMAKE BUILD_DIR PYTHON_DIR WORK_DIR, where PYTHON_DIR is
MLATUNE_INSTALL_PYTHONDIR. MLATUNE_LIBRARY names the build tree's libmlatune."""

import glob
import os
import shutil
import subprocess
import sys
import unittest

from binding_test_util import SOURCE_DIR, clean_env, loader_finds_the_soname, run_python

CMAKE, BUILD_DIR, PYTHON_DIR, WORK_DIR = sys.argv[1:5]
del sys.argv[1:5]
BUILD_LIBRARY = os.environ["MLATUNE_LIBRARY"]

# What the child prints: the package's file, what it loaded, and the libmlatune file mapped.
PROBE = """
import mlatune
maps = [line.split()[-1] for line in open("/proc/self/maps") if "libmlatune" in line]
print(mlatune.__file__)
print(mlatune.library_path())
print(maps[0])
print(mlatune.version())
"""


class InstallTest(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        if os.path.isabs(PYTHON_DIR):
            raise unittest.SkipTest(f"MLATUNE_INSTALL_PYTHONDIR={PYTHON_DIR} is outside the prefix")
        shutil.rmtree(WORK_DIR, ignore_errors=True)
        os.makedirs(WORK_DIR)
        cls.prefix = os.path.join(WORK_DIR, "prefix")
        for component in ("Runtime", "Python"):
            subprocess.run([CMAKE, "--install", BUILD_DIR, "--prefix", cls.prefix,
                            "--component", component], check=True, stdout=subprocess.DEVNULL)

    def probe(self, prefix, **extra):
        python_path = os.path.join(prefix, PYTHON_DIR)
        result = run_python(PROBE, env=clean_env(PYTHONPATH=python_path, **extra), cwd=WORK_DIR)
        self.assertEqual(result.returncode, 0, result.stderr)
        return result.stdout.split("\n")

    def installed_library(self, prefix):
        found = glob.glob(os.path.join(prefix, "**", "libmlatune.so.0"), recursive=True)
        self.assertEqual(len(found), 1, found)
        return found[0]

    def test_installed_files(self):
        package = os.path.join(self.prefix, PYTHON_DIR, "mlatune")
        self.assertEqual(sorted(os.listdir(package)),
                         ["__init__.py", "_checks.py", "_install_layout.py"])
        with open(os.path.join(package, "_install_layout.py")) as f:
            layout = f.read()
        # Relative, so that the prefix can move; and nothing of the build or source tree.
        self.assertNotIn(self.prefix, layout)
        self.assertNotIn(SOURCE_DIR, layout)
        self.assertIn('LIBRARY_FILE = "libmlatune.so.0"', layout)

    def test_installed_package_finds_the_library_of_its_prefix(self):
        package_file, loaded, mapped, version = self.probe(self.prefix)[:4]
        self.assertEqual(package_file,
                         os.path.join(self.prefix, PYTHON_DIR, "mlatune", "__init__.py"))
        self.assertEqual(loaded, self.installed_library(self.prefix))
        self.assertEqual(os.path.realpath(mapped), os.path.realpath(loaded))
        self.assertRegex(version, r"^\d+\.\d+\.\d+$")

    def test_a_moved_prefix_still_finds_its_library(self):
        moved = os.path.join(WORK_DIR, "moved")
        shutil.copytree(self.prefix, moved, symlinks=True)
        try:
            loaded, mapped = self.probe(moved)[1:3]
            self.assertEqual(loaded, self.installed_library(moved))
            self.assertEqual(os.path.realpath(mapped), os.path.realpath(loaded))
        finally:
            shutil.rmtree(moved)

    def test_mlatune_library_comes_first(self):
        loaded, mapped = self.probe(self.prefix, MLATUNE_LIBRARY=BUILD_LIBRARY)[1:3]
        self.assertEqual(loaded, BUILD_LIBRARY)
        self.assertEqual(os.path.realpath(mapped), os.path.realpath(BUILD_LIBRARY))

    def test_a_wrong_mlatune_library_is_not_replaced_by_another(self):
        missing = os.path.join(WORK_DIR, "no-such-libmlatune.so.0")
        result = run_python("import mlatune", cwd=WORK_DIR,
                            env=clean_env(PYTHONPATH=os.path.join(self.prefix, PYTHON_DIR),
                                          MLATUNE_LIBRARY=missing))
        self.assertNotEqual(result.returncode, 0)
        self.assertIn(f"mlatune.LibraryNotFoundError: mlatune: cannot load MLATUNE_LIBRARY="
                      f"{missing}", result.stderr)
        self.assertIn("point MLATUNE_LIBRARY at an existing libmlatune.so.0", result.stderr)

    def test_nothing_found_says_how_to_fix_it(self):
        if loader_finds_the_soname():
            self.skipTest("libmlatune.so.0 is on this machine's default loader path")
        without_library = os.path.join(WORK_DIR, "python-only")
        subprocess.run([CMAKE, "--install", BUILD_DIR, "--prefix", without_library,
                        "--component", "Python"], check=True, stdout=subprocess.DEVNULL)
        code = ("try:\n"
                "    import mlatune\n"
                "except ImportError as e:\n"
                "    print(type(e).__name__, e)\n")
        for python_path, tried in ((os.path.join(without_library, PYTHON_DIR),
                                    "(the install prefix): no such file"),
                                   (os.path.join(SOURCE_DIR, "python"), "Tried: libmlatune")):
            result = run_python(code, cwd=WORK_DIR, env=clean_env(PYTHONPATH=python_path))
            self.assertEqual(result.returncode, 0, result.stderr)
            self.assertTrue(result.stdout.startswith("LibraryNotFoundError "), result.stdout)
            self.assertIn("set MLATUNE_LIBRARY=/path/to/libmlatune.so.0", result.stdout)
            self.assertIn("`cmake --install <build-dir>`", result.stdout)
            self.assertIn(tried, result.stdout)


if __name__ == "__main__":
    unittest.main(verbosity=2)
