#include "data/images.h"

#include <charconv>
#include <cmath>
#include <filesystem>

#include "base/check.h"
#include "base/hash.h"
#include "base/read_file.h"

namespace hnas::data {

namespace {

void check_layout(const ImageLayout& layout) {
    HNAS_CHECK(layout.height > 0 && layout.width > 0 && layout.patch > 0 && layout.height % layout.patch == 0 &&
                   layout.width % layout.patch == 0,
               "image data: patches of ", layout.patch, " × ", layout.patch, " do not tile ", layout.height, " × ",
               layout.width, " images");
    HNAS_CHECK(layout.pixel_max > 0, "image data: pixel_max ", layout.pixel_max, " must be positive");
}

}  // namespace

ImageSet read_image_csv(const std::string& path, const ImageLayout& layout) {
    check_layout(layout);
    const std::vector<std::string> lines = read_lines(path, "image data");
    const int64_t pixels = layout.height * layout.width;
    ImageSet set;
    for (size_t n = 0; n < lines.size(); ++n) {
        const std::string& line = lines[n];
        if (line.empty() && n + 1 == lines.size()) break;
        std::vector<double> values;
        for (size_t start = 0; start <= line.size();) {
            size_t end = line.find(',', start);
            if (end == std::string::npos) end = line.size();
            double value = 0.0;
            const auto [ptr, error] = std::from_chars(line.data() + start, line.data() + end, value);
            HNAS_CHECK(error == std::errc() && ptr == line.data() + end && std::isfinite(value), path, ":", n + 1, ": \"",
                       line.substr(start, end - start), "\" is not a number");
            values.push_back(value);
            start = end + 1;
        }
        HNAS_CHECK(static_cast<int64_t>(values.size()) == pixels + 1, path, ":", n + 1, ": ", values.size(), " values, not ",
                   pixels, " pixels and a label");
        for (int64_t p = 0; p < pixels; ++p) {
            const double v = values[static_cast<size_t>(p)];
            HNAS_CHECK(v >= 0.0 && v <= layout.pixel_max, path, ":", n + 1, ": pixel ", p + 1, " is ", v, ", outside [0, ",
                       layout.pixel_max, "]");
            set.pixels.push_back(static_cast<float>(v));
        }
        const double label = values.back();
        HNAS_CHECK(label >= 0.0 && label < 1000.0 && label == std::floor(label), path, ":", n + 1, ": label ", label,
                   " is not a class id in [0, 1000)");
        set.labels.push_back(static_cast<int32_t>(label));
    }
    HNAS_CHECK(set.size() > 0, path, ": no images");
    return set;
}

ImageBatcher::ImageBatcher(ImageDataOptions options) : options_(std::move(options)) {
    images_ = read_image_csv(options_.path, options_.layout);
    std::error_code error;
    uint64_t fingerprint = std::filesystem::file_size(options_.path, error);
    for (int64_t value : {options_.layout.height, options_.layout.width, options_.layout.patch}) {
        fingerprint = hash_combine(fingerprint, static_cast<uint64_t>(value));
    }
    batches_ = std::make_unique<EpochBatches>(std::vector<int64_t>(static_cast<size_t>(images_.size()), options_.layout.patches()),
                                              BatchOptions{options_.batch, 0, 1}, options_.shuffle, options_.seed, options_.epochs,
                                              fingerprint, "image data " + options_.path);
    if (options_.same_class_templates > 0.0) {
        partners_ = std::make_unique<SameClassSampler>(images_.labels, options_.same_class_templates);
    }
}

ImageBatch ImageBatcher::batch_of(const std::vector<uint32_t>& indices) const {
    const ImageLayout& l = options_.layout;
    const int64_t rows = static_cast<int64_t>(indices.size()), across = l.width / l.patch, patches = l.patches();
    ImageBatch batch;
    batch.patches = Tensor::empty({rows, patches, l.patch_values()});
    std::vector<int32_t> labels;
    float* out = batch.patches.data();
    for (uint32_t index : indices) {
        const float* image = images_.pixels.data() + static_cast<size_t>(index) * static_cast<size_t>(l.height * l.width);
        for (int64_t p = 0; p < patches; ++p) {
            const int64_t top = (p / across) * l.patch, left = (p % across) * l.patch;
            for (int64_t r = 0; r < l.patch; ++r)
                for (int64_t c = 0; c < l.patch; ++c) *out++ = static_cast<float>(image[(top + r) * l.width + left + c] / l.pixel_max);
        }
        labels.push_back(images_.labels[index]);
        batch.example_index.push_back(index);
    }
    batch.labels = Tensor::from_ints({rows}, labels);
    return batch;
}

std::optional<ImageBatch> ImageBatcher::next() {
    const DataPosition at = batches_->position();
    const auto indices = batches_->next();
    if (!indices) return std::nullopt;
    ImageBatch batch = batch_of(*indices);
    if (partners_) batch.template_partner = partners_->draw_batch(*indices, options_.seed, at);
    return batch;
}

PartneredImageBatch ImageBatcher::with_template_partners(const ImageBatch& batch) const {
    const PartnerRows rows = append_partner_rows(batch.example_index, batch.template_partner, images_.size(), "image data " + options_.path);
    return {batch_of(rows.examples), static_cast<int64_t>(batch.example_index.size()), rows.partner_row};
}

}  // namespace hnas::data
