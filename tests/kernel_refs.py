"""Plain-torch references for the kernels (fp64), each checked on a case with a known answer."""

from __future__ import annotations

import math

import torch


def ref_index(req_to_token, seq_lens, mode, n_sink, window, depth, req_pool_indices=None):
    rows = req_pool_indices.tolist() if req_pool_indices is not None else list(range(len(seq_lens)))
    indptr, out = [0], []
    for b, s in enumerate(seq_lens.tolist()):
        r = rows[b]
        if mode == "native" or s <= n_sink + window:
            pos = list(range(s))
        else:
            pos = list(range(n_sink)) + list(range(s - window, s))
        if mode == "ring":
            out += [r * (n_sink + window + depth) + (p if p < n_sink else n_sink + (p - n_sink) % (window + depth))
                    for p in pos]
        else:
            out += [int(req_to_token[r, p]) for p in pos]
        indptr.append(len(out))
    return torch.tensor(indptr, dtype=torch.int32), torch.tensor(out, dtype=torch.int32)


def ref_attention(q, k_pool, v_pool, kv_indptr, kv_indices, qo_indptr, sm_scale=None):
    """fp64 softmax attention per request, on the inputs' device; query i of n_q sees keys
    0 .. n_kv - n_q + i. GQA by grouping query heads, never by copying K/V."""
    n_tok, hq, hd = q.shape
    hkv = k_pool.shape[1]
    group = hq // hkv
    scale = sm_scale if sm_scale is not None else 1.0 / math.sqrt(hd)
    out = torch.empty((n_tok, hq, hd), dtype=torch.float64, device=q.device)
    ptr, qo = kv_indptr.tolist(), qo_indptr.tolist()
    for b in range(len(ptr) - 1):
        idx = kv_indices[ptr[b]:ptr[b + 1]].long().to(k_pool.device)
        k = k_pool[idx].double()  # [n_kv, Hkv, D]
        v = v_pool[idx].double()
        q0, q1 = qo[b], qo[b + 1]
        n_q, n_kv = q1 - q0, len(idx)
        qq = q[q0:q1].double().view(n_q, hkv, group, hd)
        s = torch.einsum("qhgd,nhd->qhgn", qq, k) * scale
        keys = torch.arange(n_kv, device=q.device)
        allowed = keys[None, :] <= (n_kv - n_q + torch.arange(n_q, device=q.device))[:, None]  # [n_q, n_kv]
        s = s.masked_fill(~allowed[:, None, None, :], float("-inf"))
        p = torch.softmax(s, dim=-1)
        out[q0:q1] = torch.einsum("qhgn,nhd->qhgd", p, v).reshape(n_q, hq, hd)
    return out


def ref_moe(x, w_up, w_down, topk_ids, topk_weights, act="swiglu"):
    x, w_up, w_down = x.double(), w_up.double(), w_down.double()
    out = torch.zeros(x.shape[0], w_down.shape[2], dtype=torch.float64)
    ffn = w_down.shape[1]
    for t in range(x.shape[0]):
        for j in range(topk_ids.shape[1]):
            e = int(topk_ids[t, j])
            h = x[t] @ w_up[e]
            if act == "swiglu":
                g, u = h[:ffn], h[ffn:]
                h = g * torch.sigmoid(g) * u
            else:
                h = torch.relu(h) ** 2
            out[t] += float(topk_weights[t, j]) * (h @ w_down[e])
    return out


def ref_linear_state(state, q, k, v, g, beta, delta_rule=True):
    """Token-by-token recurrence in fp64; returns (outputs [B,T,H,DV], final state, all states)."""
    s = state.double().clone()
    bsz, h, dk, dv = s.shape
    t_len, hk = q.shape[1], q.shape[2]
    grp = h // hk
    out = torch.zeros(bsz, t_len, h, dv, dtype=torch.float64)
    states = torch.zeros(bsz, t_len, h, dk, dv, dtype=torch.float64)
    for b in range(bsz):
        for t in range(t_len):
            for hh in range(h):
                kk, qq = k[b, t, hh // grp].double(), q[b, t, hh // grp].double()
                vv = v[b, t, hh].double()
                s[b, hh] *= float(g[b, t, hh])
                if delta_rule:
                    s[b, hh] += torch.outer(kk, float(beta[b, t, hh]) * (vv - s[b, hh].T @ kk))
                else:
                    s[b, hh] += float(beta[b, t, hh]) * torch.outer(kk, vv)
                out[b, t, hh] = s[b, hh].T @ qq
                states[b, t, hh] = s[b, hh]
    return out, s, states
