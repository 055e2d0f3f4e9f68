"""Trace the kit's eager target-verify leg for one case: where each token's KV is.

    python scripts/kit_probe/trace_eager_verify.py --tree /work/main/build/v0.5.23/base/python \
        [--prefix 100] [--drafts 2] [--name-len 43] [--fixed-kit]

Replays ``run_speculative_cuda_graph_case``'s eager leg step by step
(speculative_cuda_graph_runner.py:160-209) with the kit's own functions, and
after each step reports, per token position of request 0, which token's K the
slot ``req_to_token[0, pos]`` holds (matched against the reference module's own
projection of prefix + draft hidden states). Then it checks what the kernel was
handed (table == req_to_token[:, ::page] // page, seq_lens == prefix + drafts)
and compares the backend's output with three references: the kit's expected
output, the swapped kernel's formula on KV gathered token by token from
``req_to_token`` (independent of the block table), and the same formula on the
reference module's own K (independent of the pool).
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
import kit_env  # noqa: E402

SHAPE = dict(kv_lora_rank=512, qk_rope_head_dim=64, hidden_size=1024, max_context_len=256)


def runs(xs):
    """[(value, first, last)] runs of equal consecutive values."""
    out = []
    for i, x in enumerate(xs):
        if out and out[-1][0] == x:
            out[-1][2] = i
        else:
            out.append([x, i, i])
    return out


def main() -> int:
    p = argparse.ArgumentParser()
    p.add_argument("--tree", required=True)
    p.add_argument("--prefix", type=int, default=100)
    p.add_argument("--drafts", type=int, default=2)
    p.add_argument("--name-len", type=int, default=43)
    p.add_argument("--fixed-kit", action="store_true")
    args = p.parse_args()
    kit_env.enter(args.tree)
    kit_env.install()

    import unittest

    import torch
    from sglang.srt.model_executor.forward_batch_info import ForwardMode
    from sglang.srt.model_executor.forward_context import ForwardContext, forward_context
    from sglang.test.kits.attention_unittest.attention_methods import mla_attention as mla
    from sglang.test.kits.attention_unittest.runner_modes import (
        speculative_target_verify_runner as stv,
    )

    if args.fixed_kit:
        import kit_fix

        kit_fix.apply()
    prepare = stv.prepare_mla_runner_inputs

    P, N, page = args.prefix, args.drafts, 64
    case = mla.MLAAttentionCase(
        name="v" * args.name_len,
        backend="trtllm_mla",
        forward_mode=ForwardMode.TARGET_VERIFY,
        num_heads=4,
        page_size=page,
        prefix_lens=(P,),
        extend_lens=(N,),
    )
    report = {"prefix": P, "drafts": N, "seed": 3090 + args.name_len, "fixed_kit": args.fixed_kit}
    tc = unittest.TestCase()
    with kit_env.device_ctx(), torch.no_grad():
        fx = mla.build_mla_attention_fixture(
            tc,
            case,
            **SHAPE,
            dtype=torch.float16,
            device="cpu",
            disable_cuda_graph=False,
            runner_batch_size=4,
        )
        fb = fx.forward_batch
        r2t = fx.runner.req_to_token_pool.req_to_token
        slots = r2t[0, : P + N].tolist()
        report["req_to_token[0]"] = [
            f"pos {a}-{b} -> slot {slots[a]}-{slots[b]}" for a, b in _contig(slots)
        ]
        report["out_cache_loc"] = fb.out_cache_loc.tolist()
        report["contiguous _token_loc(0, pos)"] = f"pos 0-{P - 1} -> slot {page}-{page + P - 1}"

        # The reference module's own K (nope) for prefix and draft tokens.
        ref = fx.reference_module
        _, kp, _, kpr = ref.project_latent_qk(fx.prefix_hidden[0])
        _, kd, _, kdr = ref.project_latent_qk(fx.input_hidden)
        k_all = torch.cat([kp, kd]).squeeze(1).float()  # (P + N, 512)
        pool = fx.runner.token_to_kv_pool

        def who(step):
            buf = pool.get_key_buffer(0).squeeze(1)[:, :512].float()
            held = []
            for pos in range(P + N):
                got = buf[slots[pos]]
                d = (k_all - got).abs().amax(-1)
                j = int(d.argmin())
                held.append(j if float(d[j]) < 1e-2 else (-1 if got.abs().max() < 1e-6 else -2))
            wrong = [pos for pos in range(P + N) if held[pos] != pos]
            report[step] = {
                "slot req_to_token[0,pos] holds token": [
                    f"pos {a}-{b}: token {held[a]}-{held[b]}"
                    if held[a] >= 0
                    else f"pos {a}-{b}: {'zeros' if held[a] == -1 else 'no token'}"
                    for a, b in _runs_by_offset(held)
                ],
                "positions holding the wrong token": len(wrong),
            }

        who("after build_mla_attention_fixture (prefix written with shuffled loc_fn)")
        stv._prepare_spec_verify_batch(case, fb, topk=1, spec_kind="eagle", device="cpu")
        prepare(fx, case, fb, mla.mla_fixture_inputs(fx), max_context_len=256)
        who("after prepare_mla_runner_inputs (eager leg, speculative_cuda_graph_runner.py:181)")
        expected = stv._target_verify_expected_output(
            reference_fn=mla.mla_attention_reference_with_custom_mask,
            fixture=fx,
            case=case,
            inputs=mla.mla_fixture_inputs(fx),
            topk=1,
            spec_kind="eagle",
            device="cpu",
        )
        fx.backend.init_cuda_graph_state(max_bs=4, max_num_tokens=4 * N)
        kit_env.CALLS.clear()
        with forward_context(ForwardContext(attn_backend=fx.backend)):
            fx.backend.init_forward_metadata(fb)
            actual = mla.run_mla_forward(fx, fb, mla.mla_fixture_inputs(fx))
        who("after the forward (draft KV written at out_cache_loc)")

        call = kit_env.CALLS[0]
        table, kl = call["table"], call["seq_lens"]
        width = -(-int(kl[0]) // page)
        oracle_table = (r2t[0, : width * page : page] // page).tolist()
        report["kernel"] = {
            "table": table[0, : width + 1].tolist(),
            "req_to_token[0, ::64] // 64": oracle_table,
            "table matches req_to_token": table[0, :width].tolist() == oracle_table,
            "pages are whole (req_to_token[0, k*64:(k+1)*64] == page*64 + 0..63)": all(
                r2t[0, k * page : min((k + 1) * page, P + N)].tolist()
                == list(
                    range(
                        oracle_table[k] * page, oracle_table[k] * page + min(page, P + N - k * page)
                    )
                )
                for k in range(width)
            ),
            "seq_lens": kl.tolist(),
            "max_seq_len": call["max_seq_len"],
            "q_shape": call["q_shape"],
            "options": call["options"],
        }

        # Independent references for the attention output (before w_vc / o_proj).
        layer = fx.actual_module.attn_mqa
        q_nope, _, q_rope, _ = fx.actual_module.forward_absorb_prepare(fx.input_hidden)
        q = torch.cat([q_nope, q_rope], -1).view(1, N, 4, 576)
        kv_tok = pool.get_key_buffer(0)[torch.tensor(slots)].squeeze(1)  # token order
        full = torch.cat([kp, kpr], -1).squeeze(1)
        full = torch.cat([full, torch.cat([kd, kdr], -1).squeeze(1)])

        def dense(keys):
            out = []
            for i in range(N):
                last = P + i  # the kit's reference: query i sees keys [0, P + i]
                s = torch.einsum("hd,kd->hk", q[0, i].float(), keys[: last + 1].float())
                out.append((s * layer.scaling).softmax(-1) @ keys[: last + 1, :512].float())
            return torch.stack(out)

        def to_out(attn):
            return fx.reference_module.reconstruct_output(attn.to(torch.float16))

        by_slots = to_out(dense(kv_tok))
        by_ref_k = to_out(dense(full))
        paged = kit_env.paged_decode(q, call["kv_cache"], table, kl, layer.scaling)
        paged_out = to_out(paged.view(N, 4, 512).float())

        def diff(a, b):
            d = (a.float() - b.float()).abs()
            bad = ~torch.isclose(a.float(), b.float(), atol=3e-2, rtol=3e-2)
            return {
                "max_abs": round(float(d.max()), 4),
                "frac_off": round(float(bad.float().mean()), 3),
            }

        report["compare"] = {
            "backend vs kit expected": diff(actual, expected),
            "paged kernel vs dense over req_to_token slots (same pool)": diff(paged_out, by_slots),
            "kit expected vs dense over the reference module's own K": diff(expected, by_ref_k),
            "backend vs dense over req_to_token slots": diff(actual, by_slots),
        }
    print(json.dumps(report, indent=1))
    return 0


def _contig(slots):
    out, a = [], 0
    for i in range(1, len(slots) + 1):
        if i == len(slots) or slots[i] != slots[i - 1] + 1:
            out.append((a, i - 1))
            a = i
    return out


def _runs_by_offset(held):
    """Runs where held[pos] - pos is constant (same token shift), or the same marker."""
    out, a = [], 0
    key = lambda i: ("m", held[i]) if held[i] < 0 else ("d", held[i] - i)  # noqa: E731
    for i in range(1, len(held) + 1):
        if i == len(held) or key(i) != key(i - 1):
            out.append((a, i - 1))
            a = i
    return out


if __name__ == "__main__":
    sys.exit(main())
