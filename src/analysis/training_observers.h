// The papers' diagnostics as training observers (train/observer.h), which `hnas train` registers: at each
// progress line every hybrid weight u per layer and head (paper 000 Fig. 3 over training), and at each
// validation the explaining-away statistics of a fixed validation batch.
#pragma once

#include <memory>
#include <vector>

#include "train/observer.h"

namespace hnas::analysis {

// Every diagnostic a training run records, in the order they write.
std::vector<std::unique_ptr<train::TrainingObserver>> training_observers();

// The observers as train::TrainOptions takes them (the vector above keeps them alive).
std::vector<train::TrainingObserver*> observer_pointers(const std::vector<std::unique_ptr<train::TrainingObserver>>& observers);

}  // namespace hnas::analysis
