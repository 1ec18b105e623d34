"""The RBM's kernels (``kernels_cu/rbm.cu``): :func:`bernoulli_logits`, the fused bias, sigmoid and Bernoulli
draw, with its NumPy twin (the same Philox words), and the fused PCD epoch, which runs on the GPU only."""

from __future__ import annotations

import numpy as np

from ... import backend as _backend
from ...random._philox import block_words, u01_f32, u01_f64_from32

FILE = "rbm.cu"
_NAMES = ("rbm_bernoulli<float>", "rbm_bernoulli<double>", "rbm_pcd_epoch<float>", "rbm_pcd_epoch<double>")
_CTYPE = {np.dtype(np.float32): "float", np.dtype(np.float64): "double"}


def bernoulli_logits(pre, bias, key, offset: int, out=None):
    """``out[r, u] = 1 if U[r, u] < sigmoid(pre[r, u] + bias[u]) else 0`` (0/1 in ``pre``'s dtype), ``U[r, u]``
    word ``e % 4`` of Philox call ``e // 4`` (``e = r * cols + u``) at call ``offset``. ``out`` may be ``pre``."""
    xp, (rows, cols) = _backend.get_array_module(pre), pre.shape
    n, out = rows * cols, xp.empty_like(pre) if out is None else out
    if n == 0:
        return out
    if xp is np:
        w = np.stack(block_words(0, -(-n // 4), key, offset), axis=1).reshape(-1)[:n].reshape(rows, cols)
        u, one = (u01_f32(w), np.float32(1.0)) if pre.dtype == np.float32 else (u01_f64_from32(w), 1.0)
        with np.errstate(over="ignore"):
            np.less(u * (one + np.exp(-(pre + bias))), one, out=out, casting="unsafe")
        return out
    from ... import _kernel_args, _loader

    fn = _loader.get_function(FILE, f"rbm_bernoulli<{_CTYPE[pre.dtype]}>", _NAMES)
    bias = _loader.contiguous(bias, pre.dtype)  # read by its address: a bias set by set_params may be strided
    _loader.launch(fn, -(-n // 4), _kernel_args.args(FILE, "rbm_bernoulli", pre=pre, bias=bias, out=out,
                                                     rows=_loader.i64(rows), cols=_loader.i64(cols),
                                                     **_kernel_args.philox(key, offset)))
    return out


def _pcd_smem_bytes(nv: int, nh: int, chains: int, itemsize: int) -> int:
    """Shared memory of the fused epoch: W, both biases, and five (chains, units) buffers."""
    return itemsize * (nv * nh + nv + nh + chains * (3 * nh + 2 * nv))


def _use_fused_pcd(fused, xp, nv, nh, chains, dtype) -> bool:
    if fused is not None and not isinstance(fused, bool):
        raise TypeError(f"fused must be True, False or None (decide), got {fused!r}.")
    if fused is False:
        return False
    if xp is np:
        if fused:
            raise ValueError("fused=True runs on the GPU only; pass backend='cupy' or leave fused=None.")
        return False
    need = _pcd_smem_bytes(nv, nh, chains, np.dtype(dtype).itemsize)
    limit = xp.cuda.runtime.getDeviceProperties(xp.cuda.runtime.getDevice())["sharedMemPerBlockOptin"]
    if need > limit:
        if fused:
            raise ValueError(f"fused=True needs {need} bytes of shared memory for these sizes; this GPU gives a "
                             f"block {limit}. Use fewer hidden units or a smaller batch_size, or fused=None.")
        return False
    return True


def _pcd_epoch(X, edges, n_batches, W, b, c, h_chain, rate, key, off0):
    """One epoch of PCD in one launch of ``rbm_pcd_epoch`` (W, b, c, h_chain updated in place)."""
    from ... import _kernel_args, _loader

    (nv, nh), chains = W.shape, h_chain.shape[0]
    fn = _loader.get_function(FILE, f"rbm_pcd_epoch<{_CTYPE[W.dtype]}>", _NAMES)
    smem = _pcd_smem_bytes(nv, nh, chains, W.dtype.itemsize)
    if smem > 48 * 1024:
        fn.max_dynamic_shared_size_bytes = smem
    fn((1,), (1024,),
       _kernel_args.args(FILE, "rbm_pcd_epoch", X=X, edges=edges, n_batches=np.int32(n_batches), nv=np.int32(nv),
                         nh=np.int32(nh), chains=np.int32(chains), W=W, b=b, c=c, h_chain=h_chain,
                         rate=np.float64(rate), k0=np.uint32(key[0]), k1=np.uint32(key[1]), off0=np.uint64(off0)),
       shared_mem=smem)
