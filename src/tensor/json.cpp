#include "tensor/json.h"

#include <vector>

#include "tensor/check.h"

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
                count_element();
                if (segments_.size() >= static_cast<size_t>(kMaxJsonDepth)) {
                    throw Error(concat_message("nesting deeper than ", kMaxJsonDepth, " levels"));
                }
                segments_.push_back({event == Event::array_start, {}, -1});
                break;
            case Event::key:
                segments_.back().key = parsed.get<std::string>();
                break;
            case Event::value:
                count_element();
                break;
            case Event::object_end:
            case Event::array_end:
                segments_.pop_back();
                break;
        }
        return true;
    }

    // "train.steps", "sources[1]", or "" at the top level. An array's element being parsed when the
    // parser stopped has not been counted yet, hence the + 1 on the innermost array.
    std::string text() const {
        std::string path;
        for (size_t i = 0; i < segments_.size(); ++i) {
            const Segment& segment = segments_[i];
            if (segment.is_array) {
                const int64_t index = segment.index + (i + 1 == segments_.size() ? 1 : 0);
                path.append("[").append(std::to_string(index)).append("]");
            } else if (!segment.key.empty()) {
                if (!path.empty()) path.append(".");
                path.append(segment.key);
            }
        }
        return path;
    }

private:
    struct Segment {
        bool is_array;
        std::string key;  // objects: the key last read
        int64_t index;    // arrays: the element last started
    };
    void count_element() {
        if (!segments_.empty() && segments_.back().is_array) ++segments_.back().index;
    }
    std::vector<Segment> segments_;
};

// nlohmann's what() without its "[json.exception.parse_error.101] " prefix.
std::string without_prefix(const char* what) {
    const std::string text(what);
    const size_t close = text.find("] ");
    return text.rfind("[json.exception.", 0) == 0 && close != std::string::npos ? text.substr(close + 2) : text;
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

}  // namespace hnas
