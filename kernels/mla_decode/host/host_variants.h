// The host (CPU) members of the MLA decode family. Each is a real multithreaded kernel.
#pragma once

#include "mla_decode/variant.h"

namespace mlatune {

// One pass over each sequence's keys with an online (running max / running sum) softmax.
const Variant& host_online_softmax_variant();  // name "host_online_softmax_v1"
// Keys processed in tiles of kv_tile: scores of a tile, then one rescale per tile.
const Variant& host_tiled_kv_variant();  // name "host_tiled_kv_v1"
// Keys cut into kv_splits parts computed in parallel, then an LSE-merge combine step.
const Variant& host_split_kv_variant();  // name "host_split_kv_v1"
// Persistent scheduling: a host-side plan deals the KV tiles to the threads in equal shares.
const Variant& host_persistent_variant();  // name "host_persistent_v1"

}  // namespace mlatune
