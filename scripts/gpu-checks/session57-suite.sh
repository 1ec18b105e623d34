#!/usr/bin/env bash
# 2 or 4 GPUs, under 10 minutes: the whole `pytest -m gpu` with every launch's arguments checked
# (session56-suite.sh's lanes), at this session's code: checkpoints of tuples in states, runs that keep no
# draw, pickles of GPU fits (host arrays, back on the GPU), fits that are all or nothing.
set -u
bash "$(dirname "$0")/session56-suite.sh"
