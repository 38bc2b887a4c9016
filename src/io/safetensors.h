// The safetensors format (Hugging Face's checkpoints): an 8-byte little-endian header length N, N bytes
// of JSON {"name": {"dtype", "shape", "data_offsets": [begin, end]}, ..., "__metadata__": {str: str}},
// then the tensors' raw little-endian bytes, the offsets relative to the start of that data, which
// they tile without holes or overlaps. hnas reads F32, F16 and BF16 (converted to f32) and writes F32;
// integer and boolean tensors (a BertModel's `position_ids` buffer) are checked like the others and
// listed, not read: no weight is an integer.
#pragma once

#include <map>
#include <string>
#include <vector>

#include "tensor/tensor.h"

namespace hnas::io {

struct SafeTensors {
    std::map<std::string, Tensor> tensors;           // by name, f32
    std::map<std::string, std::string> metadata;     // "__metadata__"
    std::map<std::string, std::string> not_read;     // integer and boolean tensors: name → dtype
};

// Reads and checks the whole file; errors name the file and the tensor: a header beyond the file, a
// header that is not JSON, a dtype safetensors does not define, a shape whose size disagrees with its byte range,
// offsets out of range, overlapping or leaving holes.
SafeTensors read_safetensors(const std::string& path);

// Writes the tensors (f32) in name order, atomically.
void write_safetensors(const std::string& path, const SafeTensors& contents);

}  // namespace hnas::io
