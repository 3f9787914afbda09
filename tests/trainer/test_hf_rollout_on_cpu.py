"""The ``hf`` rollout backend's sampling function and server, on a tiny random Llama (no Ray, no verl run)."""

import asyncio
import contextlib

import pytest
import torch
from transformers import LlamaConfig, LlamaForCausalLM

from verl_ext.cpu import hf_server, hf_worker
from verl_ext.cpu.hf_sampling import SamplingParams, SeededSampler, _filter_top_k_top_p, generate_batch

VOCAB = 96
NO_EOS = [VOCAB + 5]  # an id the model can never produce


@pytest.fixture(scope="module")
def tiny_lm():
    torch.manual_seed(0)
    cfg = LlamaConfig(
        vocab_size=VOCAB, hidden_size=32, intermediate_size=64, num_hidden_layers=2, num_attention_heads=4,
        num_key_value_heads=2, max_position_embeddings=128, pad_token_id=0, bos_token_id=1, eos_token_id=2,
        attn_implementation="sdpa",
    )
    model = LlamaForCausalLM(cfg)
    model.train()  # generate_batch must switch to eval and back
    return model


PROMPTS = [[5, 17, 33, 8, 41, 9], [12, 7], [60, 61, 62, 63]]  # different lengths: left padding matters


def reference_logprobs(model, prompt, response, temperature):
    with torch.no_grad():
        logits = model.eval()(torch.tensor([prompt + response])).logits[0].float()
    model.train()
    logp = torch.log_softmax(logits / temperature, dim=-1)
    positions = range(len(prompt) - 1, len(prompt) + len(response) - 1)
    return torch.tensor([logp[p, t].item() for p, t in zip(positions, response)])


@pytest.mark.parametrize("temperature", [1.0, 0.7])
def test_logprobs_match_a_separate_forward_pass(tiny_lm, temperature):
    torch.manual_seed(1)
    gens = generate_batch(
        tiny_lm, PROMPTS, max_new_tokens=12, params=SamplingParams(temperature=temperature), eos_token_ids=NO_EOS,
        pad_token_id=0,
    )
    assert tiny_lm.training, "train mode must be restored"
    for prompt, g in zip(PROMPTS, gens):
        assert len(g.token_ids) == 12 and len(g.log_probs) == 12
        ref = reference_logprobs(tiny_lm, prompt, g.token_ids, temperature)
        torch.testing.assert_close(torch.tensor(g.log_probs), ref, atol=1e-4, rtol=1e-4)


def test_greedy_and_eos_cut(tiny_lm):
    greedy = SamplingParams(temperature=0.0)
    assert not greedy.do_sample
    full = generate_batch(tiny_lm, PROMPTS, max_new_tokens=10, params=greedy, eos_token_ids=NO_EOS, pad_token_id=0)
    # greedy = argmax of the same forward pass: log-probs are the (T=1) log-probs of the argmax tokens
    for prompt, g in zip(PROMPTS, full):
        torch.testing.assert_close(torch.tensor(g.log_probs), reference_logprobs(tiny_lm, prompt, g.token_ids, 1.0),
                                   atol=1e-4, rtol=1e-4)
        assert not g.finished_by_eos
    # top_k=1 sampling is greedy too
    topk1 = generate_batch(tiny_lm, PROMPTS, max_new_tokens=10, params=SamplingParams(temperature=1.0, top_k=1),
                           eos_token_ids=NO_EOS, pad_token_id=0)
    assert [g.token_ids for g in topk1] == [g.token_ids for g in full]

    # declare the 4th greedy token of the first prompt an EOS: output stops right after it, EOS kept
    eos = full[0].token_ids[3]
    cut = generate_batch(tiny_lm, PROMPTS, max_new_tokens=10, params=greedy, eos_token_ids=[eos], pad_token_id=0)
    for before, after in zip(full, cut):
        if eos in before.token_ids:
            end = before.token_ids.index(eos) + 1
            assert after.token_ids == before.token_ids[:end] and after.finished_by_eos
            assert after.token_ids[-1] == eos and len(after.log_probs) == end
        else:
            assert after.token_ids == before.token_ids and not after.finished_by_eos
    assert cut[0].token_ids == full[0].token_ids[: full[0].token_ids.index(eos) + 1]


def test_per_prompt_token_caps(tiny_lm):
    gens = generate_batch(tiny_lm, PROMPTS, max_new_tokens=[3, 7, 1], params=SamplingParams(), eos_token_ids=NO_EOS,
                          pad_token_id=0)
    assert [len(g.token_ids) for g in gens] == [3, 7, 1]
    assert [len(g.log_probs) for g in gens] == [3, 7, 1]
    with pytest.raises(ValueError):
        generate_batch(tiny_lm, PROMPTS, max_new_tokens=[3, 0, 1], params=SamplingParams(), eos_token_ids=NO_EOS,
                       pad_token_id=0)


def test_sampling_params_from_verl():
    p = SamplingParams.from_verl({"temperature": 0.6, "top_p": 0.95, "top_k": -1, "repetition_penalty": 1.0,
                                  "logprobs": True})
    assert p == SamplingParams(temperature=0.6, top_p=0.95, top_k=-1, repetition_penalty=1.0) and p.do_sample
    assert not SamplingParams.from_verl({"temperature": 0}).do_sample
    assert not SamplingParams.from_verl({"temperature": 1.0, "do_sample": False}).do_sample
    assert SamplingParams.from_verl({}) == SamplingParams()


# ---- the server actor's logic, with a fake actor process standing in for Ray's __ray_call__ ----------


class _FakeActorProcess:
    """What ``__ray_call__`` would run the function in: a WorkerDict holding the hybrid worker."""

    def __init__(self, module, global_steps):
        adapter = hf_worker.HFServerAdapter.__new__(hf_worker.HFServerAdapter)  # no verl config needed here
        adapter.global_steps, adapter.sleeping, adapter.module_copy = global_steps, False, None
        engine = type("Engine", (), {"module": module})()
        worker = type("Worker", (), {"rollout": adapter, "actor": type("Actor", (), {"engine": engine})()})()
        self.worker_dict = {"actor_rollout": worker}
        self.calls = []

        outer = self

        class _Call:
            def remote(self, fn, *args):
                outer.calls.append(len(args[0]))
                fut = asyncio.get_running_loop().create_future()
                fut.set_result(fn(outer, *args))
                return fut

        self.__ray_call__ = _Call()


def test_server_batches_caps_and_reports_global_steps(tiny_lm, monkeypatch):
    monkeypatch.setattr(hf_server, "BATCH_WAIT_S", 0.01)
    actor = _FakeActorProcess(tiny_lm, global_steps=7)
    server = hf_server._HFServerImpl(actor, response_length=5, prompt_length=8, eos_token_ids=NO_EOS,
                                      pad_token_id=0)
    params = {"temperature": 1.0, "top_p": 1.0, "top_k": -1, "repetition_penalty": 1.0, "logprobs": True}

    async def main():
        reqs = [server.generate(request_id=str(i), prompt_ids=p, sampling_params=dict(params))
                for i, p in enumerate(PROMPTS * 2)]
        reqs.append(server.generate(request_id="long", prompt_ids=list(range(3, 13)), sampling_params=dict(params)))
        reqs.append(server.generate(request_id="cap", prompt_ids=[4, 5], sampling_params={**params, "max_tokens": 2}))
        return await asyncio.gather(*reqs)

    outs = asyncio.run(main())
    assert actor.calls == [len(outs)], "concurrent requests with the same sampling params form one batch"
    for out in outs[:-2]:
        assert len(out.token_ids) == 5 == len(out.log_probs)  # capped at response_length
        assert out.extra_fields["global_steps"] == 7 and out.stop_reason == "completed"
    assert len(outs[-2].token_ids) == 3  # prompt_length + response_length - len(prompt) = 8 + 5 - 10
    assert len(outs[-1].token_ids) == 2  # explicit max_tokens


def test_server_rejects_prompt_without_room(tiny_lm):
    server = hf_server._HFServerImpl(_FakeActorProcess(tiny_lm, 0), response_length=4, prompt_length=4,
                                      eos_token_ids=NO_EOS, pad_token_id=0, max_model_len=8)
    with pytest.raises(ValueError):
        asyncio.run(server.generate(prompt_ids=list(range(3, 11)), sampling_params={}))


def test_fsdp_unsharded_is_a_noop_without_fsdp(tiny_lm):
    with hf_worker._fsdp_unsharded(tiny_lm):
        pass
    assert isinstance(hf_worker._fsdp_unsharded(tiny_lm), contextlib.AbstractContextManager)


def _free_port() -> int:
    import socket

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def test_fsdp_unsharded_generation_matches_and_restores_state(tiny_lm):
    """With FSDP2 (one gloo rank, as in the CPU mode) generation is unchanged and resharding is restored."""
    import copy

    import torch.distributed as dist
    from torch.distributed.device_mesh import init_device_mesh
    from torch.distributed.fsdp import FSDPModule, fully_shard

    if dist.is_initialized():
        pytest.skip("a process group already exists in this process")
    dist.init_process_group("gloo", init_method=f"tcp://127.0.0.1:{_free_port()}", rank=0, world_size=1)
    try:
        model = copy.deepcopy(tiny_lm)
        plain = generate_batch(model, PROMPTS, max_new_tokens=6, params=SamplingParams(temperature=0.0),
                               eos_token_ids=NO_EOS, pad_token_id=0)
        mesh = init_device_mesh("cpu", (1,))
        for layer in model.model.layers:
            fully_shard(layer, mesh=mesh)
        fully_shard(model, mesh=mesh)
        fsdp_mods = [m for m in model.modules() if isinstance(m, FSDPModule)]

        def snapshot():
            return [[g.post_forward_mesh_info for g in m._get_fsdp_state()._fsdp_param_groups] for m in fsdp_mods]

        before = snapshot()
        with hf_worker._fsdp_unsharded(model):
            groups = [g for m in fsdp_mods for g in m._get_fsdp_state()._fsdp_param_groups]
            assert all(g.post_forward_mesh_info is None for g in groups)
            sharded = generate_batch(model, PROMPTS, max_new_tokens=6, params=SamplingParams(temperature=0.0),
                                     eos_token_ids=NO_EOS, pad_token_id=0)
        assert snapshot() == before
        assert [g.token_ids for g in sharded] == [g.token_ids for g in plain]
        for a, b in zip(sharded, plain):
            torch.testing.assert_close(torch.tensor(a.log_probs), torch.tensor(b.log_probs), atol=1e-5, rtol=1e-5)
        # training still works after the context (parameters resharded, gradients flow)
        model.train()
        loss = model(torch.tensor([PROMPTS[0]])).logits.float().logsumexp(-1).mean()
        loss.backward()
        assert all(p.grad is not None for p in model.parameters())
    finally:
        dist.destroy_process_group()


# ---- seeded sampling: per request, independent of batching and arrival order ---------------------------


def test_seeded_rows_do_not_depend_on_the_batch(tiny_lm):
    params = SamplingParams(temperature=1.0, top_p=0.9, top_k=40)
    together = generate_batch(tiny_lm, PROMPTS, max_new_tokens=10, params=params, eos_token_ids=NO_EOS,
                              pad_token_id=0, seeds=[11, 12, 13])
    torch.manual_seed(123)  # the global RNG plays no part
    alone = [generate_batch(tiny_lm, [p], max_new_tokens=10, params=params, eos_token_ids=NO_EOS, pad_token_id=0,
                            seeds=[s])[0] for p, s in zip(PROMPTS, [11, 12, 13])]
    assert [g.token_ids for g in together] == [g.token_ids for g in alone]
    for a, b in zip(together, alone):
        torch.testing.assert_close(torch.tensor(a.log_probs), torch.tensor(b.log_probs), atol=1e-5, rtol=1e-5)
    other = generate_batch(tiny_lm, PROMPTS, max_new_tokens=10, params=params, eos_token_ids=NO_EOS, pad_token_id=0,
                           seeds=[21, 22, 23])
    assert [g.token_ids for g in other] != [g.token_ids for g in together]


def test_seeded_sampler_filters_and_matches_the_distribution():
    scores = torch.tensor([[2.0, 1.0, 0.5, -1.0, 0.0]])
    assert torch.isinf(_filter_top_k_top_p(scores, 2, 1.0)).tolist() == [[False, False, True, True, True]]
    probs = scores.softmax(-1)[0]  # sorted: 2.0, 1.0, 0.5, 0.0, -1.0; cumulative 0.54, 0.74, 0.86, ...
    assert probs[0] < 0.6 < probs[0] + probs[1]
    assert torch.isinf(_filter_top_k_top_p(scores, 0, 0.6)).tolist() == [[False, False, True, True, True]]
    assert not torch.isinf(_filter_top_k_top_p(scores, -1, 1.0)).any()
    # Gumbel-max: the argmax frequencies follow softmax(scores / temperature)
    temperature, rows = 0.8, 4000
    sampler = SeededSampler(range(rows), SamplingParams(temperature=temperature))
    draws = sampler(None, scores.expand(rows, -1)).argmax(-1)
    freq = torch.bincount(draws, minlength=5).double() / rows
    torch.testing.assert_close(freq, (scores[0].double() / temperature).softmax(-1), atol=0.03, rtol=0)


def _serve(model, requests, *, global_steps=3, seed=42, order=None, chunks=1):
    """Responses of ``requests`` (prompt, params) served in ``order`` and in ``chunks`` waves."""
    actor = _FakeActorProcess(model, global_steps=global_steps)
    server = hf_server._HFServerImpl(actor, response_length=6, prompt_length=8, eos_token_ids=NO_EOS,
                                      pad_token_id=0, seed=seed)
    order = list(range(len(requests))) if order is None else order
    size = -(-len(order) // chunks)

    async def main():
        outs = {}
        for start in range(0, len(order), size):
            wave = order[start:start + size]
            results = await asyncio.gather(*[
                server.generate(request_id=f"r{i}-{id(server)}", prompt_ids=requests[i][0],
                                sampling_params=dict(requests[i][1])) for i in wave])
            outs.update(zip(wave, results))
        return [outs[i] for i in range(len(requests))]

    return asyncio.run(main()), actor


def _by_occurrence(requests, outs):
    """{(prompt, params, k): token ids of the k-th response to that request}: what must be reproducible."""
    seen, table = {}, {}
    for (prompt, params), out in zip(requests, outs):
        key = (tuple(prompt), tuple(sorted(params.items())))
        k = seen[key] = seen.get(key, -1) + 1
        table[key + (k,)] = out.token_ids
    return table


def test_server_samples_are_reproducible_per_prompt_and_occurrence(tiny_lm, monkeypatch):
    monkeypatch.setattr(hf_server, "BATCH_WAIT_S", 0.01)
    monkeypatch.setattr(hf_server, "MAX_BATCH", 64)
    hot = {"temperature": 1.0, "top_p": 1.0, "top_k": -1, "logprobs": True}
    cool = {"temperature": 0.7, "top_p": 0.9, "top_k": 20, "logprobs": True}
    requests = [(p, hot) for p in PROMPTS for _ in range(3)] + [(PROMPTS[0], cool), (PROMPTS[1], cool)]
    base, actor = _serve(tiny_lm, requests)
    assert actor.calls == [len(requests) - 2, 2]  # one batch per sampling configuration
    table = _by_occurrence(requests, base)

    # another order, in several waves (so different batches): the same samples per (prompt, occurrence)
    shuffled = [10, 4, 1, 7, 0, 9, 3, 8, 2, 6, 5]
    torch.manual_seed(99)
    again, actor2 = _serve(tiny_lm, requests, order=shuffled, chunks=3)
    assert len(actor2.calls) >= 3
    reordered = [requests[i] for i in shuffled]
    assert _by_occurrence(reordered, [again[i] for i in shuffled]) == table

    # occurrences of one prompt differ from each other
    for p in PROMPTS:
        key = (tuple(p), tuple(sorted(hot.items())))
        samples = [table[key + (k,)] for k in range(3)]
        assert len({tuple(s) for s in samples}) == 3, samples

    # log-probs are still those of a separate forward pass (at the request's temperature)
    for (prompt, params), out in zip(requests, base):
        ref = reference_logprobs(tiny_lm, prompt, out.token_ids, params["temperature"])
        torch.testing.assert_close(torch.tensor(out.log_probs), ref, atol=1e-4, rtol=1e-4)

    # a new weight version (or another base seed) draws new samples
    later, _ = _serve(tiny_lm, requests, global_steps=4)
    assert all(out.extra_fields["global_steps"] == 4 for out in later)
    assert [o.token_ids for o in later] != [o.token_ids for o in base]
    assert [tuple(o.token_ids) for o in later[:9]] != [tuple(o.token_ids) for o in base[:9]]
    reseeded, _ = _serve(tiny_lm, requests, seed=7)
    assert [o.token_ids for o in reseeded] != [o.token_ids for o in base]


def test_occurrence_counts_reset_with_the_weight_version(tiny_lm, monkeypatch):
    """Within one server and actor: the counter runs on across batches and restarts at a new version."""
    monkeypatch.setattr(hf_server, "BATCH_WAIT_S", 0.01)
    actor = _FakeActorProcess(tiny_lm, global_steps=1)
    server = hf_server._HFServerImpl(actor, response_length=6, prompt_length=8, eos_token_ids=NO_EOS,
                                      pad_token_id=0)
    params = {"temperature": 1.0}

    def one():
        return asyncio.run(server.generate(prompt_ids=PROMPTS[0], sampling_params=dict(params))).token_ids

    first, second = one(), one()
    assert first != second  # occurrence 0, then 1
    worker = hf_worker._find_rollout_worker(actor)
    worker.rollout.global_steps = 2
    at_two = one()
    worker.rollout.global_steps = 1  # back to version 1: counting restarts at occurrence 0
    assert one() == first and one() == second
    assert at_two not in (first, second)


def test_a_pause_waits_for_the_running_batch_and_holds_new_ones_until_resumed(tiny_lm, monkeypatch):
    """verl's colocate_async: abort_all_requests before the weight update, resume_generation after it. The batch
    running at the pause finishes on the old weights; requests sent during the pause generate with the new ones."""
    monkeypatch.setattr(hf_server, "BATCH_WAIT_S", 0.01)
    actor = _FakeActorProcess(tiny_lm, global_steps=3)
    slow = actor.__ray_call__

    class _SlowCall:  # a batch takes 0.3 s of generation after it starts (its weights read at the start)
        def remote(self, fn, *args):
            done = slow.remote(fn, *args)
            fut = asyncio.get_running_loop().create_future()
            asyncio.get_running_loop().call_later(0.3, fut.set_result, done.result())
            return fut

    actor.__ray_call__ = _SlowCall()
    server = hf_server._HFServerImpl(actor, response_length=4, prompt_length=8, eos_token_ids=NO_EOS, pad_token_id=0)
    worker = hf_worker._find_rollout_worker(actor)

    async def main():
        running = asyncio.ensure_future(server.generate(prompt_ids=PROMPTS[0], sampling_params={"temperature": 1.0}))
        await asyncio.sleep(0.1)  # its batch has started
        await server.abort_all_requests()
        assert running.done(), "the pause returned before the batch on the old weights finished"
        waiting = asyncio.ensure_future(server.generate(prompt_ids=PROMPTS[1], sampling_params={"temperature": 1.0}))
        await asyncio.sleep(0.2)
        assert not waiting.done() and actor.calls == [1], "a batch started while paused"
        worker.rollout.global_steps = 4  # the weight update
        await server.resume_generation()
        return await running, await waiting

    before, after = asyncio.run(main())
    assert before.extra_fields["global_steps"] == 3 and after.extra_fields["global_steps"] == 4
    assert actor.calls == [1, 1]


@pytest.mark.parametrize("tied", [False, True])
def test_module_copy_loads_the_synced_weights_and_samples_like_the_source(tied):
    torch.manual_seed(1)
    cfg = LlamaConfig(vocab_size=VOCAB, hidden_size=32, intermediate_size=64, num_hidden_layers=2,
                      num_attention_heads=4, num_key_value_heads=2, max_position_embeddings=128, pad_token_id=0,
                      eos_token_id=2, tie_word_embeddings=tied)
    source = LlamaForCausalLM(cfg)
    copy = hf_worker.load_module_copy(None, cfg, iter(source.state_dict().items()))  # as verl's weight sync yields
    assert copy is not source and not copy.training
    for name, p in source.state_dict().items():
        assert torch.equal(copy.state_dict()[name], p), name
    with torch.no_grad():
        source.lm_head.weight.add_(0.5)  # a training step later: the same copy is reloaded in place
    again = hf_worker.load_module_copy(copy, cfg, iter(source.state_dict().items()))
    assert again is copy and torch.equal(copy.lm_head.weight, source.lm_head.weight)
    params = SamplingParams(temperature=1.0)
    kwargs = dict(max_new_tokens=6, params=params, eos_token_ids=NO_EOS, pad_token_id=0, seeds=[3, 4, 5])
    assert [g.token_ids for g in generate_batch(copy, PROMPTS, **kwargs)] == \
        [g.token_ids for g in generate_batch(source, PROMPTS, **kwargs)]


def test_module_copy_refuses_partial_or_foreign_weights(tiny_lm):
    weights = dict(tiny_lm.state_dict())
    with pytest.raises(KeyError, match="no tensor for"):
        hf_worker.load_module_copy(None, tiny_lm.config, iter(list(weights.items())[:-1]))
    with pytest.raises(KeyError, match="not a parameter"):
        hf_worker.load_module_copy(None, tiny_lm.config, iter([*weights.items(), ("extra.weight", torch.zeros(1))]))


def test_the_cpu_preset_routes_every_request_of_a_prompt_to_one_server():
    """The balancer the CPU preset names, loaded as verl loads it: a prompt's requests follow its first one (so one
    rank counts the occurrences that seed them), a new prompt goes to the least busy server."""
    from verl.workers.rollout.router import _load_router_yaml, _resolve_router_class

    from verl_ext.cpu import cpu_overrides

    key = "actor_rollout_ref.rollout.router_config_path="
    (path,) = [o.removeprefix(key).strip("'") for o in cpu_overrides({}) if o.startswith(key)]
    config = _load_router_yaml(path)
    balancer = _resolve_router_class(config["router_class"])({"a": "A", "b": "B"}, config)
    assert balancer.require_acquire_fields() == ["prompt_ids"]
    first: dict[int, str] = {}
    for n in range(3):
        for p, prompt in enumerate(PROMPTS):
            server, handle = balancer.acquire_server(request_id=f"{n}-{p}", prompt_ids=prompt)
            assert first.setdefault(p, server) == server and handle == server.upper(), (n, p, server)
    assert first[0] != first[1], first  # the second prompt found the other server idle


def test_the_balancer_keeps_verls_protocol_and_its_counts():
    """Every method of verl's ``RequestLoadBalancer`` protocol, with verl's parameter names; in-flight counts follow
    acquire / release, a removed server's prompts move to a remaining one, a cleared cache forgets the prompts."""
    import inspect

    from verl.workers.rollout.router import RequestLoadBalancer

    from verl_ext.cpu.hf_router import PromptLoadBalancer

    wanted = {n for n in vars(RequestLoadBalancer) if not n.startswith("_")}
    assert wanted and wanted <= set(vars(PromptLoadBalancer))
    for name in wanted - {"acquire_server"}:  # acquire: verl's **extra is our declared prompt_ids
        ours, theirs = inspect.signature(getattr(PromptLoadBalancer, name)), inspect.signature(
            getattr(RequestLoadBalancer, name))
        assert list(ours.parameters) == list(theirs.parameters), name
    balancer = PromptLoadBalancer({"a": "A", "b": "B"})
    assert balancer.acquire_server("r0", prompt_ids=PROMPTS[0])[0] == "a"
    assert balancer.acquire_server("r1", prompt_ids=PROMPTS[1])[0] == "b"
    assert balancer.acquire_server("r2", prompt_ids=PROMPTS[0])[0] == "a"
    assert balancer.get_status()["servers"] == {"a": 2, "b": 1} and balancer.get_total_inflight() == 3
    balancer.release_server("a", "r0")
    balancer.release_server("gone", "r9")  # an unknown server is ignored
    assert balancer.get_status()["servers"] == {"a": 1, "b": 1}
    balancer.remove_servers(["a"])
    assert balancer.get_all_servers() == ["b"] and balancer.acquire_server("r3", prompt_ids=PROMPTS[0])[0] == "b"
    balancer.add_servers({"c": "C"})
    assert balancer.clear_sticky_cache()["cleared_entries"] == 2
    assert balancer.acquire_server("r4", prompt_ids=PROMPTS[1])[0] == "c"  # forgotten: the least busy server
    balancer.remove_servers(["b", "c"])
    with pytest.raises(RuntimeError, match="no rollout server"):
        balancer.acquire_server("r5", prompt_ids=PROMPTS[2])


def test_the_router_process_imports_neither_torch_nor_verl():
    """What keeps its Ray process light: loading the balancer (as Ray does, by module) and the servers' class, which
    Ray imports to deserialize the server handles the router holds, pulls in no torch, transformers or verl."""
    import subprocess
    import sys

    code = ("import sys, verl_ext.cpu.hf_router, verl_ext.cpu.hf_server; "
            "print(sorted({m.split('.')[0] for m in sys.modules} & {'torch', 'transformers', 'verl'}))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert out.returncode == 0 and out.stdout.strip() == "[]", out.stdout + out.stderr[-2000:]


class _FakeStandaloneWorker:
    """What ``__ray_call__`` runs the function in for separate_async: verl's ``CheckpointEngineWorker``, whose
    ``server_adapter`` is the hf adapter built without a device mesh (no actor in the process)."""

    def __init__(self, hf_config):
        from types import SimpleNamespace

        adapter = hf_worker.HFServerAdapter.__new__(hf_worker.HFServerAdapter)
        adapter.global_steps, adapter.sleeping, adapter.module_copy, adapter.standalone = 0, False, None, True
        adapter.model_config = SimpleNamespace(hf_config=hf_config, generation_config=None, tokenizer=None)
        self.server_adapter = adapter
        outer = self

        class _Call:
            def remote(self, fn, *args):
                fut = asyncio.get_running_loop().create_future()
                fut.set_result(fn(outer, *args))
                return fut

        self.__ray_call__ = _Call()


def test_a_standalone_replica_generates_with_the_weights_the_checkpoint_engine_sent(tiny_lm, monkeypatch):
    """separate_async: no weights before the first sync; the engine's asynchronous (name, tensor) stream loads a copy
    (the version with it), and the server then samples exactly what the actor's own module would."""
    monkeypatch.setattr(hf_server, "BATCH_WAIT_S", 0.01)
    worker = _FakeStandaloneWorker(tiny_lm.config)
    eos, pad = hf_worker.special_ids_on_worker(worker)  # the server starts before any weights: config ids only
    assert eos == sorted(set(hf_worker._as_id_list(tiny_lm.config.eos_token_id)))
    with pytest.raises(RuntimeError, match="no weights received yet"):
        hf_worker.generate_on_worker(worker, [PROMPTS[0]], [3], SamplingParams(), NO_EOS, 0)

    async def stream():  # as GlooCheckpointEngine.receive_weights yields them
        for name, tensor in tiny_lm.state_dict().items():
            yield name, tensor.clone()

    adapter = worker.server_adapter
    asyncio.run(adapter.update_weights(stream(), global_steps=4))
    assert adapter.global_steps == 4 and adapter.module_copy is not tiny_lm
    assert all(torch.equal(a, b) for a, b in zip(adapter.module_copy.state_dict().values(),
                                                  tiny_lm.state_dict().values()))
    standalone, _ = _serve_with(worker, seed=42)
    hybrid, _ = _serve_with(_FakeActorProcess(tiny_lm, global_steps=4), seed=42)
    assert [o.token_ids for o in standalone] == [o.token_ids for o in hybrid]
    assert all(o.extra_fields["global_steps"] == 4 for o in standalone)


def _serve_with(process, *, seed):
    server = hf_server._HFServerImpl(process, response_length=4, prompt_length=8, eos_token_ids=NO_EOS,
                                      pad_token_id=0, seed=seed)

    async def main():
        return await asyncio.gather(*[server.generate(prompt_ids=p, sampling_params={"temperature": 1.0})
                                      for p in PROMPTS])

    return asyncio.run(main()), server
