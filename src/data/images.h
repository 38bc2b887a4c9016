// Small grayscale images with class labels, for paper 003 §9 Table 1's ViT experiment at CPU scale: a
// CSV file, one image per line, its pixels row by row then its label (scikit-learn's digits.csv layout:
// 8 × 8 values 0–16, then the digit). Each image is cut into p × p patches, row-major, each patch
// flattened row-major and its pixels scaled by 1/`pixel_max`. Errors name the file and the 1-based line.
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "data/batch.h"
#include "data/epoch_batches.h"
#include "data/same_class_sampler.h"
#include "tensor/tensor.h"

namespace hnas::data {

struct ImageLayout {
    int64_t height = 8, width = 8;  // pixels
    int64_t patch = 2;              // p: patches of p × p pixels; divides height and width
    double pixel_max = 16.0;        // the pixels' full scale
    int64_t patches() const { return (height / patch) * (width / patch); }
    int64_t patch_values() const { return patch * patch; }
};

struct ImageSet {
    std::vector<float> pixels;   // n × height × width, as read
    std::vector<int32_t> labels;  // class ids ≥ 0
    int64_t size() const { return static_cast<int64_t>(labels.size()); }
};

// Throws naming file and line: a line whose value count is not height · width + 1, a value that is not
// a number in [0, pixel_max], a label that is not an integer in [0, 1000).
ImageSet read_image_csv(const std::string& path, const ImageLayout& layout);

struct ImageDataOptions {
    std::string path;
    ImageLayout layout;
    bool shuffle = true;   // false: file order (validation, test)
    uint64_t seed = 0;
    int64_t batch = 32;
    int64_t epochs = 0;    // next() ends after this many epochs; 0 = never
    double same_class_templates = 0.0;  // as ClassificationDataOptions's
};

// A batch whose rows' template partners are rows of it (as PartneredBatch).
struct PartneredImageBatch {
    ImageBatch batch;
    int64_t inputs = 0;
    std::vector<int64_t> partner_row;
};

class ImageBatcher {
public:
    explicit ImageBatcher(ImageDataOptions options);

    std::optional<ImageBatch> next();
    PartneredImageBatch with_template_partners(const ImageBatch& batch) const;
    DataPosition position() const { return batches_->position(); }
    void restore(const DataPosition& position) { batches_->restore(position); }
    const ImageSet& images() const { return images_; }

private:
    ImageBatch batch_of(const std::vector<uint32_t>& indices) const;

    ImageDataOptions options_;
    ImageSet images_;
    std::unique_ptr<EpochBatches> batches_;
    std::unique_ptr<SameClassSampler> partners_;
};

}  // namespace hnas::data
