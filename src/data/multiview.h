// A synthetic stand-in for paper 004's multi-view VQA features (§6.1, App. B; paper 000 §7.1): three
// "object detectors" look at the same random scene and each reports a set of boxes. No VQA images or
// detector features can be had here, so the scene is drawn and the detectors are fixed random maps:
//   scene      M objects (uniform in [objects_min, objects_max]), each a location in the unit square
//              and one of K colors; exactly one object is marked;
//   primary    view 0 detects each object with probability primary_recall (the marked one always) and
//              sees its location and whether it is marked, not its color;
//   secondary  views 1 and 2 split the objects (each is detected by one of them, at random) and see
//              its location and color, not the mark.
// A box's feature is its detector's fixed linear map (D × A) of the object's attributes (random
// Fourier features of the location, the mark, the color one-hot) plus noise; each view's boxes come in
// random order. The label asks two things at once:
//   color      the marked object's color: only alignment can answer it (the mark is in the primary
//              view, the color in the secondary ones, joined by location);
//   count      how many objects have color 0, up to count_classes − 1 ("or more"): it needs the
//              secondary boxes that no primary box matches, the objects the primary view missed.
// Each secondary view's one-head attention from primary queries must be sharp for the first (the
// marked object may be in either view) and keep every key for the second: softmax (LNAS) can explain
// the unmatched keys away; DNAS gives every key a total weight of at least 1/L_k (paper 000, Lemma 1).
// The label is color · count_classes + count.
//
// Batch k of a stream is drawn from its own random stream (seed, k); the detectors depend only on the
// width and the number of colors, so every stream (training, validation, test) shares them.
#pragma once

#include <array>
#include <cstdint>
#include <span>
#include <vector>

#include "base/rng.h"

namespace hnas::data {

inline constexpr int kMultiviewViews = 3;            // view 0 primary, views 1 and 2 secondary
inline constexpr int kLocationFrequencies = 24;      // random Fourier features of a location: 2 × 24
inline constexpr float kLocationBandwidth = 4.0f;    // their frequencies ~ N(0, 4²) per axis
inline constexpr float kLocationNoise = 0.01f;       // a detector's error in each coordinate
inline constexpr float kFeatureNoise = 0.05f;        // per feature

struct MultiviewOptions {
    int64_t objects_min = 8, objects_max = 32;
    int32_t colors = 4;
    int32_t count_classes = 8;
    float primary_recall = 0.5f;
    int64_t width = 64;  // D, a box feature's width
    int64_t batch = 32;
    uint64_t seed = 1;
};

struct SceneObject {
    float x = 0, y = 0;
    int32_t color = 0;
    bool marked = false;
};

struct MultiviewLabel {
    int32_t color = 0, count = 0;
};
// The label of a scene with one marked object.
MultiviewLabel multiview_label(std::span<const SceneObject> objects, int32_t count_classes);

// One view's boxes over a batch, padded to the most boxes of any row.
struct ViewBoxes {
    int64_t boxes = 0;
    std::vector<float> features;  // rows × boxes × width
    std::vector<float> valid;     // rows × boxes: 1 a box, 0 padding
};

struct MultiviewBatch {
    int64_t rows = 0, width = 0;
    std::array<ViewBoxes, kMultiviewViews> views;
    std::vector<int32_t> labels;  // color · count_classes + count
    std::vector<MultiviewLabel> parts;
    std::vector<int32_t> primary_missed;  // objects per row the primary view did not detect
};

class MultiviewGenerator {
public:
    explicit MultiviewGenerator(const MultiviewOptions& options);
    const MultiviewOptions& options() const { return options_; }
    int32_t classes() const { return options_.colors * options_.count_classes; }
    // Batch `index` of the stream.
    MultiviewBatch batch(uint64_t index) const;

private:
    // The attributes a view sees of an object, as the A-vector its detector maps.
    std::vector<float> attributes(const SceneObject& object, int view, Rng& rng) const;

    MultiviewOptions options_;
    int64_t attribute_width_;
    std::vector<float> frequencies_;                          // kLocationFrequencies × 2
    std::array<std::vector<float>, kMultiviewViews> maps_;   // width × attribute_width, row-major
};

}  // namespace hnas::data
