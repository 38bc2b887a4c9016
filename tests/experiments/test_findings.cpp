// docs/findings.md held to its records: `scripts/sweep_records.py figures` recomputes each figure that
// docs/experiments/findings_figures.json names from its stored comparison and fails unless the row
// that cites it prints it.
#include <string>

#include "base/read_file.h"
#include "test_support.h"

namespace hnas {
namespace {

const std::string kFindings = std::string(HNAS_SOURCE_DIR) + "/docs/findings.md";

testing::Outcome check_figures(const std::string& findings, const testing::ScratchDir& scratch) {
    const testing::Subprocess process = testing::start_subprocess(
        {"/usr/bin/python3", std::string(HNAS_SOURCE_DIR) + "/scripts/sweep_records.py", "figures", "--findings", findings},
        scratch.path("figures.log"));
    return {testing::finish(process), process.output()};
}

TEST(Findings, EveryListedFigureIsAsItsStoredComparisonGivesIt) {
    const testing::ScratchDir scratch(testing::name_for_this_test("hnas_findings_"));
    const testing::Outcome outcome = check_figures(kFindings, scratch);
    EXPECT_EQ(outcome.exit_code(), 0) << outcome.output;
    EXPECT_CONTAINS(outcome.output, "each as its stored comparison gives it");
}

// Row 15's LNAS mean (75.76 in paper003_text's comparison) misprinted: the check names the row.
TEST(Findings, AFigureThatDiffersFromItsRecordFails) {
    const testing::ScratchDir scratch(testing::name_for_this_test("hnas_findings_"));
    std::string page = read_file(kFindings, "findings");
    const std::string printed = "LNAS 75.76 ± 0.51, HNAS 77.15";
    const size_t at = page.find(printed);
    ASSERT_NE(at, std::string::npos) << "row 15 no longer prints " << printed;
    page.replace(at, printed.size(), "LNAS 75.67 ± 0.51, HNAS 77.15");
    const testing::Outcome outcome = check_figures(scratch.write("findings.md", page), scratch);
    EXPECT_EQ(outcome.exit_code(), 1) << outcome.output;
    EXPECT_CONTAINS(outcome.output, "row 15: mean LNAS accuracy 100 2 is 75.76");
}

}  // namespace
}  // namespace hnas
