#include "base/json.h"

#include <limits>
#include <vector>

#include "base/check.h"

namespace hnas {

namespace {

// Where the parser is: one segment per open object or array, so an error can name "train.steps" or
// "data.train_sources[2].path".
class KeyPath {
public:
    // nlohmann's parser callback: follows the structure, refuses nesting beyond kMaxJsonDepth.
    bool on_event(nlohmann::detail::parse_event_t event, const Json& parsed) {
        using Event = nlohmann::detail::parse_event_t;
        switch (event) {
            case Event::object_start:
            case Event::array_start:
                if (segments_.size() >= static_cast<size_t>(kMaxJsonDepth)) {
                    throw Error(concat_message("nesting deeper than ", kMaxJsonDepth, " levels"));
                }
                segments_.push_back({event == Event::array_start, {}, 0});
                break;
            case Event::key:
                segments_.back().key = parsed.get<std::string>();
                break;
            case Event::value:
                element_done();
                break;
            case Event::object_end:
            case Event::array_end:
                segments_.pop_back();
                element_done();
                break;
        }
        return true;
    }

    // "train.steps", "sources[1].path", or "" at the top level; the middle of a very deep path is
    // left out.
    std::string text() const {
        constexpr size_t kShownFirst = 6, kShownLast = 3;
        std::string path;
        for (size_t i = 0; i < segments_.size(); ++i) {
            if (segments_.size() > kShownFirst + kShownLast + 1 && i == kShownFirst) {
                path.append("...");
                i = segments_.size() - kShownLast - 1;
                continue;
            }
            const Segment& segment = segments_[i];
            if (segment.is_array) {
                path.append("[").append(std::to_string(segment.elements_done)).append("]");
            } else if (!segment.key.empty()) {
                if (!path.empty() && !path.ends_with("...")) path.append(".");
                path.append(segment.key);
            }
        }
        return path;
    }

private:
    struct Segment {
        bool is_array;
        std::string key;        // objects: the key last read
        int64_t elements_done;  // arrays: complete elements, so also the index of the one being read
    };
    void element_done() {
        if (!segments_.empty() && segments_.back().is_array) ++segments_.back().elements_done;
    }
    std::vector<Segment> segments_;
};

// nlohmann's what() without its "[json.exception.parse_error.101] " prefix.
std::string without_prefix(const char* what) {
    const std::string text(what);
    const size_t close = text.find("] ");
    return text.rfind("[json.exception.", 0) == 0 && close != std::string::npos ? text.substr(close + 2) : text;
}

// A value as an error message shows it: its JSON, cut short when long (a whole array is no help).
std::string shown(const Json& value) {
    constexpr size_t kShown = 80;
    const std::string text = value.dump(-1, ' ', false, Json::error_handler_t::replace);
    return text.size() <= kShown ? text : text.substr(0, kShown) + "...";
}

}  // namespace

Json parse_json(std::string_view text, const std::string& context) {
    KeyPath path;
    auto callback = [&path](int /*depth*/, nlohmann::detail::parse_event_t event, Json& parsed) {
        return path.on_event(event, parsed);
    };
    auto where = [&path] {
        const std::string at = path.text();
        return at.empty() ? std::string() : " (at " + at + ")";
    };
    try {
        return Json::parse(text, callback, /*allow_exceptions=*/true, /*ignore_comments=*/false);
    } catch (const Error& e) {
        throw Error(context + " " + e.what() + where());
    } catch (const nlohmann::json::exception& e) {
        throw Error(context + " " + without_prefix(e.what()) + where());
    }
}

int64_t json_integer(const Json& value, int64_t low, int64_t high, const std::string& what) {
    // nlohmann holds a non-negative integer as unsigned, so one above INT64_MAX has no int64_t value.
    const bool integer = value.is_number_unsigned()
                             ? value.get<uint64_t>() <= static_cast<uint64_t>(std::numeric_limits<int64_t>::max())
                             : value.is_number_integer();
    const int64_t number = integer ? value.get<int64_t>() : 0;
    HNAS_CHECK(integer && number >= low && number <= high, what, " must be an integer in [", low, ", ", high, "], got ",
               shown(value));
    return number;
}

double json_number(const Json& value, const std::string& what) {
    HNAS_CHECK(value.is_number(), what, " must be a number, got ", shown(value));
    return value.get<double>();
}

}  // namespace hnas
