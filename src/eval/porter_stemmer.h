// The stemming of the original ROUGE-1.5.5 scorer (its `-m` option): the Porter (1980) stemmer in
// the variant ROUGE ships, and "MorphStem", which first looks a word up in the WordNet 2.0
// morphological exception lists and only falls back to Porter when the word is not listed.
// Reproducing ROUGE scores exactly needs both, including ROUGE's quirks (documented in the .cpp).
#pragma once

#include <cstddef>
#include <string>
#include <string_view>
#include <unordered_map>

namespace hnas::eval {

// Porter's suffix stripping as ROUGE-1.5.5 applies it. Expects a lowercase word; words shorter
// than 3 characters come back unchanged. Differs from Porter's paper in step 4, which also tries
// -ment and -ent after the first suffix rule (ROUGE's 2004 change, kept for fidelity): hence
// "agreement" -> "agreem" where Porter's own stemmer keeps "agreement".
std::string porter_stem(std::string_view word);

// The WordNet 2.0 exception lists (adj.exc adv.exc noun.exc verb.exc) as the lookup table ROUGE
// builds from them: inflected form -> its first listed base form.
class WordNetExceptions {
public:
    // Reads the four files from `dir`; throws std::runtime_error naming a file it cannot open.
    explicit WordNetExceptions(const std::string& dir);

    // The base form for `word`, or nullptr when the word is not an exception.
    const std::string* find(std::string_view word) const;
    size_t size() const { return table_.size(); }

private:
    std::unordered_map<std::string, std::string> table_;
};

// ROUGE-1.5.5's MorphStem: lowercase, then the exception table's base form if the word is listed
// (not stemmed further), else porter_stem. The scorer only calls it for tokens longer than 3
// characters; that length rule lives in the tokenizer, as in ROUGE.
class MorphStemmer {
public:
    explicit MorphStemmer(const std::string& wordnet_dir) : exceptions_(wordnet_dir) {}

    std::string stem(std::string_view token) const;
    const WordNetExceptions& exceptions() const { return exceptions_; }

private:
    WordNetExceptions exceptions_;
};

}  // namespace hnas::eval
