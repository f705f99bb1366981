"""A plain dict-based visit table, the reference the array hash table is tested against."""

import numpy as np


class DictVisits:
    """N(s, a) and Delta Q(s, a) in one dict keyed by (replica, state, action)."""

    def __init__(self, replicas, n_states, n_actions):
        self.replicas, self.n_states, self.n_actions = replicas, n_states, n_actions
        self.counts_, self.delta_ = {}, {}

    def rows(self, states):
        counts = np.zeros((self.replicas, self.n_actions), dtype=np.int64)
        delta = np.zeros((self.replicas, self.n_actions))
        for b, s in enumerate(states.tolist()):
            for a in range(self.n_actions):
                counts[b, a] = self.counts_.get((b, s, a), 0)
                delta[b, a] = self.delta_.get((b, s, a), 0.0)
        return counts, delta

    def increment(self, states, actions, active):
        for b in np.flatnonzero(active).tolist():
            key = (b, int(states[b]), int(actions[b]))
            self.counts_[key] = self.counts_.get(key, 0) + 1

    def set_delta(self, states, actions, values, active):
        for b in np.flatnonzero(active).tolist():
            self.delta_[(b, int(states[b]), int(actions[b]))] = float(values[b])

    def visited(self):
        """Distinct (replica, state) pairs written to."""
        return len({key[:2] for key in (*self.counts_, *self.delta_)})
