// A tensor shape read from a file's JSON header (safetensors, checkpoints): the one place such a shape
// is checked, so no reader allocates or copies from a count the file chose.
#pragma once

#include <string>

#include "base/json.h"
#include "tensor/shape.h"

namespace hnas::io {

// `dims` must be a list of non-negative integers whose product is at most kMaxTensorElements (checked
// without overflow). Otherwise throws an Error starting with `what` (the file and the tensor) and
// quoting the list as the file gives it.
Shape read_shape(const Json& dims, const std::string& what);

}  // namespace hnas::io
