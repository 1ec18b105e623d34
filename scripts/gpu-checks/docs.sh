#!/usr/bin/env bash
# GPU checks of the README's and the guides' examples (run from the repository root on a GPU machine).
# Most examples pass backend="numpy"; with CuPy present the rest (the guides' examples, which use the
# default backend) run on the GPU. The docs build itself needs no GPU.
set -x
python -m pytest tests/test_readme.py -q -p no:cacheprovider 2>&1 | tail -15
python -m pytest tests/test_readme.py -q -p no:cacheprovider -m slow 2>&1 | tail -15
# The mixture and LDA notebooks with their full settings (GPUMCMC_SMALL=0: the whole FACSCalibur file,
# k = 16 and 64; K up to 160 with 500 + 500 sweeps), which no CPU run exercises; executed copies in $OUT.
for nb in mixture lda; do
  GPUMCMC_SMALL=0 python -c "
import sys, time, nbformat, nbclient
nb = nbformat.read('notebooks/$nb.ipynb', as_version=4)
t = time.perf_counter()
nbclient.NotebookClient(nb, timeout=600, kernel_name='python3').execute()
nbformat.write(nb, '$OUT/${nb}_full.ipynb')
print('$nb: full settings ran in %.1f s' % (time.perf_counter() - t))
" 2>&1 | tail -5
done
