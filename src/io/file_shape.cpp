#include "io/file_shape.h"

#include "base/check.h"

namespace hnas::io {

Shape read_shape(const Json& dims, const std::string& what) {
    HNAS_CHECK(dims.is_array(), what, ": the shape ", dims.dump(), " is not a list");
    Shape shape;
    for (const Json& dim : dims) {
        // Tested as unsigned first: a value beyond int64's range would turn negative in the cast.
        HNAS_CHECK(dim.is_number_unsigned() && dim.get<uint64_t>() <= static_cast<uint64_t>(kMaxTensorElements), what,
                   ": the shape ", dims.dump(), " must list integers in [0, ", kMaxTensorElements, "]");
        shape.push_back(dim.get<int64_t>());
    }
    (void)shape_numel(shape, what);  // the product's bound
    return shape;
}

}  // namespace hnas::io
