// Helpers shared by the test executables: random inputs, the finite-difference gradient check, the
// reader for PyTorch fixtures (tests/fixtures/*.json, written by scripts/make_fixtures.py), small
// checks of error messages, tensors and files, and subprocesses with waits for events.
#pragma once

#include <fcntl.h>
#include <gtest/gtest.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <filesystem>
#include <fstream>
#include <map>
#include <functional>
#include <nlohmann/json.hpp>
#include <sstream>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "autograd/variable.h"
#include "backend/kernels.h"
#include "backend/matmul.h"
#include "base/read_file.h"
#include "base/rng.h"
#include "data/tokenizer.h"
#include "nn/attention_norm.h"
#include "nn/module.h"
#include "ops/ops.h"
#include "tensor/random.h"
#include "same_tensor.h"

// Skips a test of bf16 products on a CPU without them (oneDNN needs AVX-512 BF16 or AMX): there hnas
// refuses bf16 with a clear error, and the f32 tests cover the rest.
#define HNAS_SKIP_WITHOUT_BF16()                                                       \
    do {                                                                               \
        if (!hnas::backend::bf16_matmul_available())                                   \
            GTEST_SKIP() << "oneDNN has no bf16 matmul on this CPU (AVX-512 BF16 or AMX)"; \
    } while (false)

// Expects `part` inside `text`, printing both when it is missing (a macro, so failures name the line).
#define EXPECT_CONTAINS(text, part) \
    EXPECT_NE(std::string(text).find(part), std::string::npos) << "missing \"" << (part) << "\" in: " << (text)

namespace hnas::testing {

// The message of the hnas::Error that f throws, or a note that it threw none.
template <typename F>
std::string error_of(F&& f) {
    try {
        f();
    } catch (const Error& e) {
        return e.what();
    }
    return "(no hnas::Error thrown)";
}

// Kind `kind`'s settings from an attention stack's config keys ({"hybrid_init": 0.3, "sinkhorn_iterations":
// 3}): every kind reads its own keys from them, as a config's stack does.
inline nn::KindSettingsPtr stack_kind_settings(const std::string& kind, const Json& stack_keys) {
    config::ConfigNode node(stack_keys, "attention");
    const nn::KindSettingsByName settings = nn::read_kind_settings(node);
    node.finish();
    return settings.at(kind);
}

// The normalization `kind` with `heads` heads and its settings from `stack_keys` (stack_kind_settings).
inline std::unique_ptr<nn::AttentionNorm> make_attention_norm(const std::string& kind, int64_t heads,
                                                              const Json& stack_keys = Json::object()) {
    return nn::find_attention_kind(kind).make(*stack_kind_settings(kind, stack_keys), heads);
}

// Sets the matmul precision for one scope and restores f32 after it, also when an assertion fails, so
// later tests in the same process run as they would alone.
struct PrecisionScope {
    explicit PrecisionScope(backend::MatmulPrecision precision) { backend::set_matmul_precision(precision); }
    ~PrecisionScope() { backend::set_matmul_precision(backend::MatmulPrecision::f32); }
    PrecisionScope(const PrecisionScope&) = delete;
    PrecisionScope& operator=(const PrecisionScope&) = delete;
};

// Whether a tensor's bf16 copy is current and holds its values rounded to the nearest even bf16.
inline ::testing::AssertionResult holds_current_bf16_copy(const Tensor& tensor) {
    std::vector<uint16_t> expected(static_cast<size_t>(tensor.numel()));
    kernels::convert_to_bf16(tensor.data(), expected.data(), tensor.numel());
    const auto [copy, current] = tensor.bf16_copy();
    if (!current) return ::testing::AssertionFailure() << "the bf16 copy is stale";
    for (size_t i = 0; i < expected.size(); ++i) {
        if (copy[i] != expected[i]) return ::testing::AssertionFailure() << "bf16 value " << i << " differs";
    }
    return ::testing::AssertionSuccess();
}

// Per-step training losses from a run directory's metrics log (every record with a "loss").
inline std::vector<double> logged_losses(const std::string& run_dir) {
    std::vector<double> losses;
    std::ifstream in(run_dir + "/metrics.jsonl");
    std::string line;
    while (std::getline(in, line)) {
        const auto record = nlohmann::json::parse(line);
        if (record.contains("loss")) losses.push_back(record.at("loss").get<double>());
    }
    return losses;
}

// Whether a run directory's metrics log holds a whole record: a running trainer has logged its first
// step (with log_every 1), so it is in its training loop, its signal handlers in place.
inline bool logged_a_record(const std::string& run_dir) {
    std::ifstream in(run_dir + "/metrics.jsonl");
    std::string line;
    return std::getline(in, line) && !in.eof();  // a line with its newline, not one being written
}

// Copies the first `lines` lines of the file `from` to the file `to`; returns `to`.
inline std::string copy_head(const std::string& from, const std::string& to, int lines) {
    std::ifstream in(from);
    std::ofstream out(to);
    std::string line;
    for (int i = 0; i < lines && std::getline(in, line); ++i) out << line << "\n";
    return to;
}

// ---- Subprocesses and events ------------------------------------------------------------------------
// Tests that run the command line wait for events (a file appears, a process ends), never for a fixed
// time, and only up to a deadline generous enough for a loaded 2-core machine running two tests at
// once: a deadline ends a test that would hang; it is not a measure of speed.
constexpr double kEventDeadlineSeconds = 300;

// Polls `happened` every 50 ms until it returns true or `seconds` have passed; whether it happened.
inline bool wait_until(const std::function<bool()>& happened, double seconds = kEventDeadlineSeconds) {
    const auto deadline = std::chrono::steady_clock::now() + std::chrono::duration<double>(seconds);
    while (!happened()) {
        if (std::chrono::steady_clock::now() >= deadline) return false;
        std::this_thread::sleep_for(std::chrono::milliseconds(50));
    }
    return true;
}

// ---- Scratch folders, files and tokenizers -----------------------------------------------------------

// Writes `bytes` as the whole file `path`, failing the test when it cannot. Reading is base/read_file.h's;
// this plain write stays: base's write_file_atomically goes through an fsynced, renamed temporary file,
// more than a scratch file needs.
inline void write_file(const std::string& path, const std::string& bytes) {
    std::ofstream out(path, std::ios::binary | std::ios::trunc);
    out.write(bytes.data(), static_cast<std::streamsize>(bytes.size()));
    EXPECT_TRUE(out.good()) << "cannot write " << path;
}

// A temporary folder `<name><pid>` for the files of one test program, removed with its contents when
// the object goes (for a function-local static: when the program ends).
class ScratchDir {
public:
    explicit ScratchDir(const std::string& name)
        : root(std::filesystem::temp_directory_path() / (name + std::to_string(getpid()))) {
        std::filesystem::remove_all(root);
        std::filesystem::create_directories(root);
    }
    ~ScratchDir() {
        std::error_code ignored;
        std::filesystem::remove_all(root, ignored);
    }
    ScratchDir(const ScratchDir&) = delete;
    ScratchDir& operator=(const ScratchDir&) = delete;

    std::string path(const std::string& name) const { return (root / name).string(); }
    // Writes `content` as the file `name`; returns its path.
    std::string write(const std::string& name, const std::string& content) const {
        write_file(path(name), content);
        return path(name);
    }
    // The first `lines` lines of `source` as the file `name`; returns its path.
    std::string head_of(const std::string& source, int lines, const std::string& name) const {
        return copy_head(source, path(name), lines);
    }
    // A SentencePiece model trained on options.inputs as `<prefix>.model` here; returns its path.
    std::string train_tokenizer(const std::string& prefix, data::TokenizerTrainOptions options) const {
        options.model_prefix = path(prefix);
        data::train_tokenizer(options);
        return options.model_prefix + ".model";
    }

    const std::filesystem::path root;
};

// "<prefix><test name>_": a ScratchDir name of its own for the running test.
inline std::string name_for_this_test(const std::string& prefix) {
    std::string name = ::testing::UnitTest::GetInstance()->current_test_info()->name();
    std::replace(name.begin(), name.end(), '/', '_');  // parameterized tests: "Case/0"
    return prefix + name + "_";
}

// A folder of a ScratchDir for one run: empty at the start, removed at the end.
struct RunDir {
    std::filesystem::path path;
    RunDir(const ScratchDir& scratch, const std::string& name) : path(scratch.root / name) { std::filesystem::remove_all(path); }
    ~RunDir() {
        std::error_code ignored;
        std::filesystem::remove_all(path, ignored);
    }
};

// Up to `count` first lines of a text file.
inline std::vector<std::string> first_lines(const std::string& path, size_t count) {
    std::ifstream in(path);
    std::vector<std::string> lines;
    for (std::string line; lines.size() < count && std::getline(in, line);) lines.push_back(line);
    return lines;
}

// A scratch folder with a small SentencePiece model trained there on the first 2,000 lines of
// Moby-Dick: the fixtures of the fine-tuning data tests.
class ScratchWithTokenizer : public ScratchDir {
public:
    explicit ScratchWithTokenizer(const std::string& name) : ScratchDir(name), tokenizer(train_moby(*this)) {}

    data::Tokenizer tokenizer;

private:
    static data::Tokenizer train_moby(const ScratchDir& scratch) {
        data::TokenizerTrainOptions options;
        options.inputs = {scratch.head_of(std::string(HNAS_SOURCE_DIR) + "/data/corpus/moby_dick.txt", 2000, "moby.txt")};
        options.vocab_size = 500;
        return data::Tokenizer::load(scratch.train_tokenizer("moby", options));
    }
};

// A child process whose standard output and error go to the file `log`.
struct Subprocess {
    pid_t pid = -1;
    std::string log;

    // "" before the child has opened it (a diagnostic printed when the start failed).
    std::string output() const { return std::filesystem::exists(log) ? hnas::read_file(log, "subprocess log") : ""; }
    // Whether it has ended, without collecting its status (finish() still can).
    bool ended() const {
        siginfo_t info{};
        return waitid(P_PID, static_cast<id_t>(pid), &info, WEXITED | WNOHANG | WNOWAIT) == 0 && info.si_pid == pid;
    }
};

// Starts args[0] (a path) with the arguments args[1...] and this process's environment with the
// variables `environment` set and those named in `unset` removed; its output is appended to `log`.
// Everything the child needs is made before fork(): another thread may hold the allocator's lock then.
inline Subprocess start_subprocess(const std::vector<std::string>& args, const std::string& log,
                                   const std::vector<std::pair<std::string, std::string>>& environment = {},
                                   const std::vector<std::string>& unset = {}) {
    std::vector<std::string> variables;
    for (const auto& [name, value] : environment) variables.push_back(name + "=" + value);
    for (char** variable = environ; *variable != nullptr; ++variable) {
        const std::string name = std::string(*variable).substr(0, std::string(*variable).find('='));
        const bool replaced =
            std::any_of(environment.begin(), environment.end(), [&](const auto& set) { return set.first == name; });
        if (!replaced && std::find(unset.begin(), unset.end(), name) == unset.end()) variables.emplace_back(*variable);
    }
    std::vector<char*> argv, envp;
    for (const std::string& arg : args) argv.push_back(const_cast<char*>(arg.c_str()));
    argv.push_back(nullptr);
    for (const std::string& variable : variables) envp.push_back(const_cast<char*>(variable.c_str()));
    envp.push_back(nullptr);
    Subprocess process{-1, log};
    process.pid = fork();
    if (process.pid == 0) {
        const int out = open(log.c_str(), O_WRONLY | O_CREAT | O_APPEND, 0644);
        dup2(out, 1);
        dup2(out, 2);
        execve(argv[0], argv.data(), envp.data());
        _exit(127);
    }
    return process;
}

// The environment of an mpirun child. CI runs as root, which Open MPI refuses without this consent.
// Under the sanitizers: Open MPI leaves allocations at exit that MPI_Finalize does not free, many made
// by MCA components it has already unloaded (so no suppression by library name can match them), and
// LeakSanitizer would fail every rank; leak checking stays on for single-process runs and the rest of
// the suite, address and undefined-behaviour checks stay on for the ranks.
inline std::vector<std::pair<std::string, std::string>> mpirun_environment() {
    std::vector<std::pair<std::string, std::string>> environment{{"OMPI_ALLOW_RUN_AS_ROOT", "1"},
                                                                 {"OMPI_ALLOW_RUN_AS_ROOT_CONFIRM", "1"}};
#ifdef HNAS_SANITIZE
    const char* options = std::getenv("ASAN_OPTIONS");
    environment.emplace_back("ASAN_OPTIONS", std::string(options ? options : "") + ":detect_leaks=0");
#endif
    return environment;
}

// Waits for the process to end, at most `seconds`; its wait status, or -1 after killing it (SIGKILL)
// at the deadline.
inline int finish(const Subprocess& process, double seconds = kEventDeadlineSeconds) {
    const bool ended = wait_until([&] { return process.ended(); }, seconds);
    if (!ended) kill(process.pid, SIGKILL);
    int status = 0;
    waitpid(process.pid, &status, 0);
    return ended ? status : -1;
}

// "exit status 3", "killed by signal 9" or "still running at the deadline", for failure messages.
inline std::string describe_status(int status) {
    if (status == -1) return "still running at the deadline";
    if (WIFSIGNALED(status)) return "killed by signal " + std::to_string(WTERMSIG(status));
    return "exit status " + std::to_string(WEXITSTATUS(status));
}

// The end of a run of the hnas executable: its wait status and its standard output and error.
struct Outcome {
    int status = 0;
    std::string output;
    int exit_code() const { return WIFEXITED(status) ? WEXITSTATUS(status) : -1; }
};

// Runs `hnas args...` to its end, its output logged in a new file of `scratch`.
inline Outcome run_hnas(const std::vector<std::string>& args, const ScratchDir& scratch) {
    static int runs = 0;
    std::vector<std::string> command{HNAS_EXECUTABLE};
    command.insert(command.end(), args.begin(), args.end());
    const Subprocess process = start_subprocess(command, scratch.path("hnas_run_" + std::to_string(++runs) + ".log"));
    const int status = finish(process);
    return {status, process.output()};
}

inline Tensor random_tensor(const Shape& shape, uint64_t seed, float low = -1.0f, float high = 1.0f) {
    Rng rng(seed, 7);
    return uniform_tensor(rng, shape, low, high);
}

// A function of several differentiable inputs, returning one Var.
using TestFunction = std::function<Var(const std::vector<Var>&)>;

struct GradCheckOptions {
    float step = 1e-2f;        // finite-difference step
    double tolerance = 2e-3;   // on max |numeric − analytic| / (1 + |analytic|)
};

// Checks the gradient of L = Σ f(inputs) ⊙ R (R fixed and random) for every element of every input
// against the four-point central difference (8·(L(x+h/2) − L(x−h/2)) − (L(x+h) − L(x−h))) / (6h),
// with L accumulated in double. Returns the worst error so callers can report it.
inline double check_gradients(const std::vector<Tensor>& inputs, const TestFunction& f, const GradCheckOptions& options,
                              const std::string& label) {
    std::vector<Var> vars;
    for (const Tensor& input : inputs) vars.emplace_back(input.clone(), true);
    Var output = f(vars);
    const Tensor weights = random_tensor(output.shape(), 991);
    Var loss = ops::sum_all(ops::mul(output, Var(weights)));
    loss.backward();

    auto evaluate = [&](const std::vector<Tensor>& values) {
        NoGradScope no_grad;
        std::vector<Var> fresh;
        for (const Tensor& value : values) fresh.emplace_back(value);
        const Tensor out = f(fresh).value();
        double total = 0.0;
        for (int64_t i = 0; i < out.numel(); ++i) total += static_cast<double>(out.data()[i]) * weights.data()[i];
        return total;
    };

    double worst = 0.0;
    std::vector<Tensor> values;
    for (const Tensor& input : inputs) values.push_back(input.clone());
    for (size_t which = 0; which < inputs.size(); ++which) {
        const Tensor analytic = vars[which].grad();
        EXPECT_TRUE(analytic.defined()) << label << ": no gradient reached input " << which;
        if (!analytic.defined()) continue;
        for (int64_t j = 0; j < values[which].numel(); ++j) {
            const float original = values[which].data()[j];
            // data() before each write: it marks the copies products keep (bf16, packed) stale.
            auto at = [&](float offset) {
                values[which].data()[j] = original + offset;
                return evaluate(values);
            };
            const double h = options.step;
            const double numeric =
                (8.0 * (at(options.step / 2) - at(-options.step / 2)) - (at(options.step) - at(-options.step))) /
                (6.0 * h);
            values[which].data()[j] = original;
            const double exact = analytic.data()[j];
            const double error = std::abs(numeric - exact) / (1.0 + std::abs(exact));
            worst = std::max(worst, error);
            EXPECT_LE(error, options.tolerance) << label << ": input " << which << " element " << j << " numeric "
                                                << numeric << " analytic " << exact;
        }
    }
    return worst;
}

// ---- PyTorch fixtures --------------------------------------------------------------------------------
using Json = nlohmann::ordered_json;

inline Json load_fixture(const std::string& file) {
    const std::string path = std::string(HNAS_SOURCE_DIR) + "/tests/fixtures/" + file;
    std::ifstream in(path);
    if (!in) throw Error("fixture not found: " + path + " (regenerate with /usr/bin/python3 scripts/make_fixtures.py)");
    return Json::parse(in);
}

// The "cases" of a fixture file, loaded once; their names (for parameterized tests); one case by name.
inline const Json& fixture_cases(const std::string& file) {
    static std::map<std::string, Json> loaded;
    auto found = loaded.find(file);
    if (found == loaded.end()) found = loaded.emplace(file, load_fixture(file).at("cases")).first;
    return found->second;
}

inline std::vector<std::string> fixture_case_names(const std::string& file) {
    std::vector<std::string> names;
    for (const Json& c : fixture_cases(file)) names.push_back(c.at("name").get<std::string>());
    return names;
}

inline const Json& fixture_case(const std::string& file, const std::string& name) {
    for (const Json& c : fixture_cases(file)) {
        if (c.at("name") == name) return c;
    }
    throw Error("fixture " + file + " has no case " + name);
}

inline Shape json_shape(const Json& tensor) { return tensor.at("shape").get<Shape>(); }

inline Tensor json_tensor(const Json& tensor) {
    if (tensor.value("dtype", std::string("float32")) == "int32") {
        return Tensor::from_ints(json_shape(tensor), tensor.at("data").get<std::vector<int32_t>>());
    }
    const std::vector<double> data = tensor.at("data").get<std::vector<double>>();
    return Tensor::from_floats(json_shape(tensor), std::vector<float>(data.begin(), data.end()));
}

// max |actual − expected| / (atol + rtol·|expected|) ≤ 1 elementwise; reports the worst element.
inline void expect_close(const Tensor& actual, const Json& expected, double atol, double rtol, const std::string& label) {
    ASSERT_EQ(actual.shape(), json_shape(expected)) << label << ": shape";
    const std::vector<double> reference = expected.at("data").get<std::vector<double>>();
    double worst = 0.0;
    int64_t worst_at = 0;
    for (int64_t i = 0; i < actual.numel(); ++i) {
        const double ratio = std::abs(actual.data()[i] - reference[static_cast<size_t>(i)]) /
                             (atol + rtol * std::abs(reference[static_cast<size_t>(i)]));
        if (!(ratio <= worst)) {
            worst = ratio;
            worst_at = i;
        }
    }
    EXPECT_LE(worst, 1.0) << label << ": element " << worst_at << " is " << actual.data()[worst_at] << ", expected "
                          << reference[static_cast<size_t>(worst_at)];
}

}  // namespace hnas::testing

namespace hnas::testing {

// The finite-difference check of every parameter of a module: `f` runs the module's forward on
// fixed inputs; parameters are perturbed in place, one element at a time.
inline double check_parameter_gradients(const nn::Module& module, const std::function<Var()>& f,
                                        const GradCheckOptions& options, const std::string& label) {
    const auto parameters = module.named_parameters();
    for (const auto& named : parameters) named.parameter.node()->grad_initialized = false;
    Var output = f();
    const Tensor weights = random_tensor(output.shape(), 993);
    ops::sum_all(ops::mul(output, Var(weights))).backward();
    auto evaluate = [&] {
        NoGradScope no_grad;
        const Tensor out = f().value();
        double total = 0.0;
        for (int64_t i = 0; i < out.numel(); ++i) total += static_cast<double>(out.data()[i]) * weights.data()[i];
        return total;
    };
    double worst = 0.0;
    for (const auto& named : parameters) {
        const Tensor analytic = named.parameter.grad();
        EXPECT_TRUE(analytic.defined()) << label << ": no gradient reached " << named.name;
        if (!analytic.defined()) continue;
        Tensor& value = const_cast<Var&>(named.parameter).value();
        for (int64_t j = 0; j < named.parameter.numel(); ++j) {
            const float original = value.data()[j];
            // data() before each write: it marks the copies products keep (bf16, packed) stale.
            auto at = [&](float offset) {
                value.data()[j] = original + offset;
                return evaluate();
            };
            const double h = options.step;
            const double numeric = (8.0 * (at(options.step / 2) - at(-options.step / 2)) - (at(options.step) - at(-options.step))) / (6.0 * h);
            value.data()[j] = original;
            const double exact = analytic.data()[j];
            const double error = std::abs(numeric - exact) / (1.0 + std::abs(exact));
            worst = std::max(worst, error);
            EXPECT_LE(error, options.tolerance) << label << ": " << named.name << " element " << j << " numeric "
                                                << numeric << " analytic " << exact;
        }
    }
    return worst;
}

}  // namespace hnas::testing
