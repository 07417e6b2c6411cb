"""GPU check of lessons 09 and 10: run once on a machine with a CUDA GPU; prints one table.

    python benchmarks/gpu_check.py --out runs/gpu_check        # on a CUDA machine
    python benchmarks/gpu_check.py --cpu-smoke                 # rehearsal on a CPU: smoke preset

What it does, in order (each part timed, a failure in one does not stop the others):

1. device and autocast paths: lesson 09's preset/device choice, one `fit` step on the GPU
   (matrix products in bf16 under autocast, the loss and the weights in float32),
   `greedy_decode_cached` equal to lesson 08's `greedy_decode` on the GPU, a checkpoint
   written on the GPU and reloaded on the CPU;
2. lesson 09 top to bottom (`solutions/09_training/09_training.ipynb`) with the `gpu`
   preset, through papermill (`-p PRESET gpu`); without papermill, the notebook's code
   cells run in this process instead (said so in the output); then the checkpoint the
   notebook saved is scored on the whole test split;
3. time to 99% test exact match: `benchmarks/train_numerals.py --preset gpu --curve`,
   with the peak GPU memory of training;
4. training tokens/s of the course's model against `nn.Transformer` of the same sizes in
   bf16: `benchmarks/throughput.py --preset gpu`, with each model's peak memory.

Lesson 10 (its `gpu` preset: bf16 autocast, `F.scaled_dot_product_attention`):

5. `l10_paths`: one `fit` step on the GPU (bf16 logits, float32 weights); the SDPA switch
   against the manual attention of the lesson's `DecoderBlock` on the GPU (float32 to 1e-5,
   and under bf16 autocast to bf16's precision); generation with the KV cache equal to the
   model's own forward; a checkpoint written on the GPU reloaded on the CPU;
6. `l10_throughput`: training tokens/s and peak memory of the `gpu` preset's model with the
   manual attention against the same model through `F.scaled_dot_product_attention`;
7. `l10_train`: time to 99% test exact match, `benchmarks/decoder_only.py --preset gpu
   --only 10 --curve`, with the peak GPU memory.

Without CUDA it stops at once with exit status 2 (`--cpu-smoke` rehearses every part on
the CPU with the smoke preset instead). Exit status 1 if any part failed.
"""

from __future__ import annotations

import argparse
import contextlib
import io
import json
import os
import sys
import time
import traceback
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
NOTEBOOK = ROOT / "solutions" / "09_training" / "09_training.ipynb"
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "benchmarks"))

NO_CUDA = """gpu_check: no CUDA device is visible to PyTorch (torch {version}, built for CUDA {cuda}).
This check is meant for a machine with an NVIDIA GPU: it runs lesson 09 with the `gpu`
preset. On this machine, use `python benchmarks/train_numerals.py` (cpu preset), or
rehearse this script's parts with `python benchmarks/gpu_check.py --cpu-smoke`."""


def check_paths(preset: str, out: Path) -> list[str]:
    """Part 1: the device, autocast and checkpoint paths of lesson 09's code."""
    import torch

    from coursekit.data import CharVocab, load_numerals, make_batches
    from coursekit.reference.lesson08 import greedy_decode
    from coursekit.reference.lesson09 import (
        autocast_forward,
        build_model,
        choose_device,
        fit,
        greedy_decode_cached,
        load_checkpoint,
        load_preset,
        make_optimizer,
        save_checkpoint,
        training_set,
    )

    notes = []
    device = choose_device()
    cfg = load_preset(preset, "digits2zh", max_steps=1, eval_every=1, eval_examples=50)
    train = load_numerals("train")[:2000]
    src_vocab, tgt_vocab = CharVocab.build(s for s, _ in train), CharVocab.build(t for _, t in train)
    torch.manual_seed(0)
    model = build_model(cfg, src_vocab, tgt_vocab).to(device)
    if device.type == "cuda":
        autocast_forward(model)  # what lesson 09's training cell does when AMP is true
    optimizer, scheduler = make_optimizer(model, cfg)
    dtypes = []
    hook = model.generator.register_forward_hook(lambda m, i, o: dtypes.append(o.dtype))
    history = fit(model, cfg, training_set(train, cfg), load_numerals("valid")[:50], src_vocab, tgt_vocab,
                  optimizer, scheduler, progress=False)
    hook.remove()
    want = torch.bfloat16 if device.type == "cuda" else torch.float32
    assert dtypes[0] == want, f"logits in training were {dtypes[0]}, expected {want} on {device.type}"
    assert all(p.dtype == torch.float32 and p.device.type == device.type for p in model.parameters())
    assert history.steps == 1 and history.loss[0] == history.loss[0], "no finite loss"
    notes.append(f"fit on {device}: logits {dtypes[0]}, weights float32, loss {history.loss[0]:.3f}")

    src, _ = next(make_batches(load_numerals("valid")[:256], src_vocab, tgt_vocab, 256, shuffle=False))
    src = src.to(device)
    same = torch.equal(greedy_decode(model, src, 20, 1, 2), greedy_decode_cached(model, src, 20, 1, 2))
    assert same, "greedy_decode_cached differs from greedy_decode on the GPU"
    notes.append("greedy_decode_cached == greedy_decode on the device")

    path = out / "paths_check.pt"
    save_checkpoint(path, model, cfg, src_vocab, tgt_vocab, history.steps)
    reloaded, cfg2, _, _ = load_checkpoint(path, "cpu")
    on_cpu = reloaded.state_dict()
    assert all(torch.equal(tensor.cpu(), on_cpu[name]) for name, tensor in model.state_dict().items())
    assert cfg2 == cfg
    notes.append("checkpoint saved on the device reloads on the CPU (same weights, same preset)")
    return notes


def check_paths_10(preset: str, out: Path) -> list[str]:
    """Part 5: lesson 10's device, autocast, SDPA, KV-cache and checkpoint paths."""
    import dataclasses

    import torch

    from coursekit.data import load_numerals
    from coursekit.reference.lesson10 import (
        build_model,
        build_vocab,
        choose_device,
        fit,
        greedy_answers,
        lm_batch,
        load_checkpoint,
        load_preset,
        make_optimizer,
        prompt_batch,
        save_checkpoint,
        training_set,
        use_sdpa,
    )

    notes = []
    device = choose_device()
    cfg = load_preset(preset, "digits2zh", max_steps=1, eval_every=1, eval_examples=50)
    train = load_numerals("train")[:2000]
    vocab = build_vocab(train)
    torch.manual_seed(0)
    model = build_model(cfg, vocab, device)           # the preset's switches: sdpa, bf16 autocast on CUDA
    optimizer, scheduler = make_optimizer(model, cfg)
    dtypes = []
    hook = model.lm_head.register_forward_hook(lambda m, i, o: dtypes.append(o.dtype))
    history = fit(model, cfg, training_set(train, cfg), load_numerals("valid")[:50], vocab, optimizer, scheduler,
                  progress=False)
    hook.remove()
    want = torch.bfloat16 if device.type == "cuda" and cfg.amp else torch.float32
    assert dtypes[0] == want, f"logits in training were {dtypes[0]}, expected {want} on {device.type}"
    assert all(p.dtype == torch.float32 and p.device.type == device.type for p in model.parameters())
    assert history.steps == 1 and history.loss[0] == history.loss[0], "no finite loss"
    notes.append(f"fit on {device} (sdpa {cfg.sdpa}, amp {cfg.amp}): logits {dtypes[0]}, weights float32, "
                 f"loss {history.loss[0]:.3f}")

    plain = build_model(dataclasses.replace(cfg, sdpa=False, amp=False, compile=False), vocab, device).eval()
    plain.load_state_dict(model.state_dict())
    ids, _ = lm_batch(load_numerals("valid")[:256], vocab)
    ids = ids.to(device)
    keep = ids != vocab.pad_id
    with torch.no_grad():
        manual = plain(ids)
        fast = use_sdpa(plain)(ids)
        torch.testing.assert_close(fast[keep], manual[keep], rtol=1e-5, atol=1e-5)
        diffs = [f"float32 {(fast - manual)[keep].abs().max().item():.1e}"]
        if device.type == "cuda":
            with torch.autocast("cuda", dtype=torch.bfloat16):
                fast16 = plain(ids).float()
                use_sdpa(plain, on=False)
                manual16 = plain(ids).float()
            diff = (fast16 - manual16)[keep].abs().max().item()
            scale = manual[keep].abs().max().item()
            assert diff <= 0.05 * scale, f"under bf16 autocast SDPA and manual differ by {diff:.3f} (logits up to {scale:.1f})"
            diffs.append(f"bf16 {diff:.1e} (logits up to {scale:.1f})")
        use_sdpa(plain, on=False)
    notes.append("F.scaled_dot_product_attention == the manual attention on the device: " + ", ".join(diffs))

    prompts = prompt_batch([s for s, _ in load_numerals("valid")[:64]], vocab).to(device)
    cached = greedy_answers(plain, prompts, 17, vocab.eos_id)
    tokens, done = prompts, torch.zeros(len(prompts), dtype=torch.bool, device=device)
    with torch.no_grad():
        for _ in range(cached.size(1)):
            nxt = plain(tokens)[:, -1].argmax(-1).masked_fill(done, vocab.pad_id)
            tokens, done = torch.cat([tokens, nxt[:, None]], 1), done | (nxt == vocab.eos_id)
    assert torch.equal(cached, tokens[:, prompts.size(1):]), "greedy_answers (KV cache) differs from the model's forward"
    notes.append("greedy_answers (KV cache) == the model's own forward on the device")

    path = out / "paths_check_10.pt"
    save_checkpoint(path, model, cfg, vocab, history)
    reloaded, cfg2, _, _ = load_checkpoint(path, "cpu")
    on_cpu = reloaded.state_dict()
    assert all(torch.equal(tensor.cpu(), on_cpu[name]) for name, tensor in model.state_dict().items())
    assert cfg2 == cfg
    notes.append("checkpoint saved on the device reloads on the CPU")
    return notes


def throughput_10(preset: str, steps: int) -> str:
    """Part 6: training tokens/s and peak memory, manual attention against F.scaled_dot_product_attention."""
    import dataclasses

    import torch

    from coursekit.data import load_numerals
    from coursekit.reference.lesson10 import (
        build_model,
        build_vocab,
        choose_device,
        lm_batches,
        load_preset,
        make_optimizer,
        train_step,
        training_set,
    )

    device = choose_device()
    cfg = load_preset(preset, "digits2zh")
    train = training_set(load_numerals("train"), cfg)
    vocab = build_vocab(train)
    batches = [b for _, b in zip(range(steps + 3), lm_batches(train, vocab, cfg.batch_size, seed=1), strict=False)]
    results = []
    for sdpa in (False, True):
        torch.manual_seed(0)
        model = build_model(dataclasses.replace(cfg, sdpa=sdpa), vocab, device)
        optimizer, scheduler = make_optimizer(model, cfg)
        for batch in batches[:3]:                      # warm-up (and compilation, if any)
            train_step(model, batch, optimizer, scheduler, clip=cfg.clip)
        if device.type == "cuda":
            torch.cuda.synchronize()
            torch.cuda.reset_peak_memory_stats()
        start, tokens = time.perf_counter(), 0
        for batch in batches[3:]:
            tokens += int((batch[0] != vocab.pad_id).sum())
            train_step(model, batch, optimizer, scheduler, clip=cfg.clip)
        if device.type == "cuda":
            torch.cuda.synchronize()
        seconds = time.perf_counter() - start
        peak = f", peak {torch.cuda.max_memory_allocated() / 2**20:,.0f} MiB" if device.type == "cuda" else ""
        results.append(f"{'F.scaled_dot_product_attention' if sdpa else 'manual attention'} "
                       f"{tokens / seconds:,.0f} tokens/s{peak}")
        print(results[-1], flush=True)
    return "; ".join(results)


def _code_cells(notebook: Path) -> list[tuple[str, bool]]:
    """(source, is the parameters cell) of the code cells, nbgrader's test cells left out."""
    nb = json.loads(notebook.read_text(encoding="utf-8"))
    cells = []
    for cell in nb["cells"]:
        grading = cell.get("metadata", {}).get("nbgrader", {})
        if cell["cell_type"] == "code" and not (grading.get("grade") and not grading.get("solution")):
            src = "".join(cell["source"]) if isinstance(cell["source"], list) else cell["source"]
            cells.append((src, "parameters" in (cell.get("metadata", {}).get("tags") or [])))
    return cells


def run_notebook(parameters: dict, out: Path) -> tuple[str, float]:
    """Part 2: the notebook top to bottom; returns (how it ran, seconds)."""
    start = time.perf_counter()
    executed = out / "09_training.executed.ipynb"
    os.environ["PYTHONPATH"] = os.pathsep.join(filter(None, [str(ROOT), os.environ.get("PYTHONPATH")]))
    try:
        import papermill
    except ImportError:
        papermill = None
    if papermill is not None:
        papermill.execute_notebook(str(NOTEBOOK), str(executed), parameters=parameters, cwd=str(out),
                                   kernel_name="python3", progress_bar=False)
        return "by papermill", time.perf_counter() - start
    # No papermill (nor, usually, a Jupyter kernel): the code cells in this process, the
    # parameters set right after the parameters cell, as papermill would; not the test
    # cells, which need the grader's dependencies and say nothing about the GPU.
    import matplotlib

    matplotlib.use("Agg")
    namespace: dict = {"__name__": "__main__"}
    log = out / "09_training.executed.log"
    with open(log, "w") as f, contextlib.redirect_stdout(f), contextlib.chdir(out):
        for source, is_parameters in _code_cells(NOTEBOOK):
            source = "\n".join(line for line in source.splitlines() if not line.lstrip().startswith(("%", "!")))
            exec(compile(source, str(NOTEBOOK), "exec", dont_inherit=True), namespace)  # as a kernel would
            if is_parameters:
                namespace.update(parameters)
    return f"in this process (papermill is not installed; output in {log.name})", time.perf_counter() - start


def score_checkpoint(checkpoint: Path) -> str:
    import torch

    from coursekit.data import load_numerals
    from coursekit.reference.lesson09 import choose_device, exact_match, load_checkpoint

    model, cfg, src_vocab, tgt_vocab = load_checkpoint(checkpoint, choose_device())
    acc, _ = exact_match(model, load_numerals("test", cfg.direction), src_vocab, tgt_vocab)
    del model
    if torch.cuda.is_available():
        torch.cuda.empty_cache()
    return f"the notebook's checkpoint ({cfg.name}, {cfg.direction}): test exact match {acc:.2%}"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", type=Path, default=ROOT / "runs" / "gpu_check",
                        help="folder for the executed notebook, checkpoints and JSON results")
    parser.add_argument("--direction", default="digits2zh", choices=["digits2zh", "zh2digits"])
    parser.add_argument("--max-minutes", type=float, default=4.0,
                        help="training budget of the notebook and of the benchmark run, each")
    parser.add_argument("--skip", default="", help="comma-separated parts to skip: paths,notebook,train,"
                                                   "throughput,l10_paths,l10_throughput,l10_train")
    parser.add_argument("--cpu-smoke", action="store_true",
                        help="rehearse every part on the CPU with the smoke preset (no CUDA needed)")
    args = parser.parse_args(argv)

    import torch

    if not torch.cuda.is_available() and not args.cpu_smoke:
        print(NO_CUDA.format(version=torch.__version__, cuda=torch.version.cuda), file=sys.stderr)
        return 2
    preset = "smoke" if args.cpu_smoke else "gpu"
    if not torch.cuda.is_available():
        from coursekit.reference.lesson09 import choose_threads

        torch.set_num_threads(choose_threads())  # busy cores make extra OpenMP threads crawl
    skip = {s.strip() for s in args.skip.split(",") if s.strip()}
    out = args.out.resolve()
    out.mkdir(parents=True, exist_ok=True)
    device = torch.cuda.get_device_name() if torch.cuda.is_available() else "CPU (rehearsal)"
    print(f"gpu_check: {device}, torch {torch.__version__} (CUDA {torch.version.cuda}), preset {preset}, "
          f"{args.direction}, out {out}", flush=True)
    if torch.cuda.is_available():
        print(f"bf16 supported: {torch.cuda.is_bf16_supported()}", flush=True)
    rows: list[tuple[str, str, float, str]] = []

    def part(name: str, fn) -> None:
        if name in skip:
            rows.append((name, "skipped", 0.0, ""))
            return
        print(f"\n=== {name}", flush=True)
        start = time.perf_counter()
        try:
            detail = fn()
            rows.append((name, "ok", time.perf_counter() - start, detail))
        except Exception as exc:  # report and go on with the next part
            traceback.print_exc()
            rows.append((name, "FAILED", time.perf_counter() - start, f"{type(exc).__name__}: {exc}"[:300]))

    def paths() -> str:
        return "; ".join(check_paths(preset, out))

    def notebook() -> str:
        run_dir = out / "notebook_runs"
        os.environ["COURSE_RUN_DIR"] = str(run_dir)
        changes = {"max_minutes": args.max_minutes}
        how, seconds = run_notebook({"PRESET": preset, "DIRECTION": args.direction, "CHANGES": changes}, out)
        checkpoint = run_dir / preset / f"numerals_{args.direction}.pt"
        return f"ran {how} in {seconds:.0f} s; " + score_checkpoint(checkpoint)

    def train() -> str:
        import train_numerals

        if torch.cuda.is_available():
            torch.cuda.reset_peak_memory_stats()
        log = io.StringIO()
        with contextlib.redirect_stdout(log):
            train_numerals.main(["--preset", preset, "--direction", args.direction, "--curve", "--quiet",
                                 "--max-minutes", str(args.max_minutes), "--history", str(out / "train.json"),
                                 "--checkpoint", str(out / "train.pt")])
        (out / "train.log").write_text(log.getvalue())
        print(log.getvalue(), flush=True)
        run = json.loads((out / "train.json").read_text())["runs"][0]
        curve = run["test_curve"]
        first = next((i for i, a in enumerate(curve) if a >= 0.99), None)
        peak = (f", peak GPU memory {torch.cuda.max_memory_allocated() / 2**20:,.0f} MiB"
                if torch.cuda.is_available() else "")
        reached = (f"test >= 99% first at step {run['eval_step'][first]}" if first is not None
                   else "test never reached 99%")
        return (f"{reached}; stopped at step {run['steps']} after {run['train_s']:.1f} s training + "
                f"{run['valid_s']:.1f} s validation, test {run['test']:.2%}, "
                f"{run['tokens'] / run['train_s']:,.0f} target tokens/s{peak}")

    def throughput() -> str:
        import throughput as bench

        log = io.StringIO()
        with contextlib.redirect_stdout(log):
            bench.main(["--preset", preset, "--rounds", "4" if torch.cuda.is_available() else "1",
                        "--steps", "20" if torch.cuda.is_available() else "2"])
        (out / "throughput.log").write_text(log.getvalue())
        print(log.getvalue(), flush=True)
        lines = [line for line in log.getvalue().splitlines()
                 if line.startswith(("ours / nn.Transformer", "peak GPU memory", "| median"))]
        return "; ".join(lines)

    def paths_10() -> str:
        return "; ".join(check_paths_10(preset, out))

    def throughput_10_part() -> str:
        return throughput_10(preset, 40 if torch.cuda.is_available() else 2)

    def train_10() -> str:
        import decoder_only

        if torch.cuda.is_available():
            torch.cuda.reset_peak_memory_stats()
        log = io.StringIO()
        with contextlib.redirect_stdout(log):
            decoder_only.main(["--preset", preset, "--direction", args.direction, "--only", "10", "--curve",
                               "--max-minutes", str(args.max_minutes), "--history", str(out / "train_10.json")])
        (out / "train_10.log").write_text(log.getvalue())
        print(log.getvalue(), flush=True)
        run = json.loads((out / "train_10.json").read_text())["runs"][0]
        curve = run["test_curve"]
        first = next((i for i, a in enumerate(curve) if a >= 0.99), None)
        peak = (f", peak GPU memory {torch.cuda.max_memory_allocated() / 2**20:,.0f} MiB"
                if torch.cuda.is_available() else "")
        reached = (f"test >= 99% first at step {run['eval_step'][first]}" if first is not None
                   else "test never reached 99%")
        return (f"{reached}; stopped at step {run['steps']} after {run['train_s']:.1f} s training + "
                f"{run['valid_s']:.1f} s validation, test {run['test']:.2%}, "
                f"{run['read'] / run['train_s']:,.0f} tokens/s{peak}")

    part("paths", paths)
    part("notebook", notebook)
    part("train", train)
    part("throughput", throughput)
    part("l10_paths", paths_10)
    part("l10_throughput", throughput_10_part)
    part("l10_train", train_10)

    print("\n| part | result | seconds | detail |\n| --- | --- | ---: | --- |")
    for name, status, seconds, detail in rows:
        print(f"| {name} | {status} | {seconds:.0f} | {detail} |")
    (out / "gpu_check.json").write_text(json.dumps(
        {"device": device, "torch": torch.__version__, "preset": preset, "direction": args.direction,
         "parts": [dict(zip(("part", "result", "seconds", "detail"), r, strict=True)) for r in rows]}, indent=1))
    return 1 if any(status == "FAILED" for _, status, _, _ in rows) else 0


if __name__ == "__main__":
    raise SystemExit(main())
