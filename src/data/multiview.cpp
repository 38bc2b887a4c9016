#include "data/multiview.h"

#include <algorithm>
#include <cmath>
#include <numbers>

#include "base/check.h"

namespace hnas::data {

namespace {
// The fixed detectors' stream (frequencies and maps), apart from every data stream.
constexpr uint64_t kDetectorSeed = 0x6465'7465'6374'6f72ULL;
// Attribute layout: [location features | marked | color one-hot].
constexpr int64_t kLocationWidth = 2 * kLocationFrequencies;
}  // namespace

MultiviewLabel multiview_label(std::span<const SceneObject> objects, int32_t count_classes) {
    HNAS_CHECK(count_classes >= 2, "multiview label: count_classes must be >= 2, got ", count_classes);
    const auto marked = std::count_if(objects.begin(), objects.end(), [](const SceneObject& o) { return o.marked; });
    HNAS_CHECK(marked == 1, "multiview label: a scene needs exactly one marked object, got ", marked);
    MultiviewLabel label;
    for (const SceneObject& object : objects) {
        if (object.marked) label.color = object.color;
        label.count += object.color == 0;
    }
    label.count = std::min(label.count, count_classes - 1);
    return label;
}

MultiviewGenerator::MultiviewGenerator(const MultiviewOptions& options)
    : options_(options), attribute_width_(kLocationWidth + 1 + options.colors) {
    HNAS_CHECK(options.objects_min >= 1 && options.objects_max >= options.objects_min, "multiview data: objects_min ",
               options.objects_min, " and objects_max ", options.objects_max, " must satisfy 1 <= min <= max");
    HNAS_CHECK(options.colors >= 2 && options.count_classes >= 2, "multiview data: colors ", options.colors,
               " and count_classes ", options.count_classes, " must be >= 2");
    HNAS_CHECK(options.primary_recall > 0.0f && options.primary_recall <= 1.0f, "multiview data: primary_recall ",
               options.primary_recall, " must be in (0, 1]");
    HNAS_CHECK(options.width >= 1 && options.batch >= 1, "multiview data: width ", options.width, " and batch ",
               options.batch, " must be positive");
    Rng rng(kDetectorSeed, static_cast<uint64_t>(options.width * 1000 + options.colors));
    frequencies_.resize(2 * kLocationFrequencies);
    for (float& f : frequencies_) f = kLocationBandwidth * rng.normal();
    const float scale = 1.0f / std::sqrt(static_cast<float>(attribute_width_));
    for (auto& map : maps_) {
        map.resize(static_cast<size_t>(options.width * attribute_width_));
        for (float& w : map) w = scale * rng.normal();
    }
}

std::vector<float> MultiviewGenerator::attributes(const SceneObject& object, int view, Rng& rng) const {
    std::vector<float> a(static_cast<size_t>(attribute_width_), 0.0f);
    const float x = object.x + kLocationNoise * rng.normal(), y = object.y + kLocationNoise * rng.normal();
    // cos and sin of 2π w·(x, y), scaled so that two locations' features have dot product ≈ exp(−2π²σ²d²).
    const float norm = 1.0f / std::sqrt(static_cast<float>(kLocationFrequencies));
    for (int k = 0; k < kLocationFrequencies; ++k) {
        const float phase = 2.0f * std::numbers::pi_v<float> * (frequencies_[2 * k] * x + frequencies_[2 * k + 1] * y);
        a[static_cast<size_t>(2 * k)] = norm * std::cos(phase);
        a[static_cast<size_t>(2 * k + 1)] = norm * std::sin(phase);
    }
    if (view == 0) {
        a[kLocationWidth] = object.marked ? 1.0f : 0.0f;
    } else {
        a[static_cast<size_t>(kLocationWidth + 1 + object.color)] = 1.0f;
    }
    return a;
}

MultiviewBatch MultiviewGenerator::batch(uint64_t index) const {
    const MultiviewOptions& o = options_;
    Rng rng(o.seed, index);
    MultiviewBatch batch;
    batch.rows = o.batch;
    batch.width = o.width;
    // Each row's detected objects per view, drawn first so the padding is known.
    std::vector<std::array<std::vector<SceneObject>, kMultiviewViews>> detected(static_cast<size_t>(o.batch));
    for (auto& views : detected) {
        const auto count = o.objects_min + static_cast<int64_t>(rng.below(static_cast<uint64_t>(o.objects_max - o.objects_min + 1)));
        std::vector<SceneObject> scene(static_cast<size_t>(count));
        for (SceneObject& object : scene) {
            object.x = rng.uniform();
            object.y = rng.uniform();
            object.color = static_cast<int32_t>(rng.below(static_cast<uint64_t>(o.colors)));
        }
        scene[rng.below(scene.size())].marked = true;
        const MultiviewLabel label = multiview_label(scene, o.count_classes);
        batch.parts.push_back(label);
        batch.labels.push_back(label.color * o.count_classes + label.count);
        for (const SceneObject& object : scene) {
            if (object.marked || rng.uniform() < o.primary_recall) views[0].push_back(object);
        }
        batch.primary_missed.push_back(static_cast<int32_t>(scene.size() - views[0].size()));
        for (const SceneObject& object : scene) views[1 + rng.below(2)].push_back(object);
        for (auto& view : views) {
            for (size_t i = view.size(); i > 1; --i) std::swap(view[i - 1], view[rng.below(i)]);  // Fisher-Yates
        }
    }
    for (int v = 0; v < kMultiviewViews; ++v) {
        ViewBoxes& boxes = batch.views[static_cast<size_t>(v)];
        for (const auto& views : detected) {
            boxes.boxes = std::max<int64_t>(boxes.boxes, static_cast<int64_t>(views[static_cast<size_t>(v)].size()));
        }
        boxes.features.assign(static_cast<size_t>(o.batch * boxes.boxes * o.width), 0.0f);
        boxes.valid.assign(static_cast<size_t>(o.batch * boxes.boxes), 0.0f);
        const std::vector<float>& map = maps_[static_cast<size_t>(v)];
        for (int64_t row = 0; row < o.batch; ++row) {
            const auto& objects = detected[static_cast<size_t>(row)][static_cast<size_t>(v)];
            for (size_t box = 0; box < objects.size(); ++box) {
                const int64_t slot = row * boxes.boxes + static_cast<int64_t>(box);
                boxes.valid[static_cast<size_t>(slot)] = 1.0f;
                const std::vector<float> a = attributes(objects[box], v, rng);
                float* feature = boxes.features.data() + slot * o.width;
                for (int64_t d = 0; d < o.width; ++d) {
                    float sum = kFeatureNoise * rng.normal();
                    const float* row_of_map = map.data() + d * attribute_width_;
                    for (int64_t k = 0; k < attribute_width_; ++k) sum += row_of_map[k] * a[static_cast<size_t>(k)];
                    feature[d] = sum;
                }
            }
        }
    }
    return batch;
}

}  // namespace hnas::data
