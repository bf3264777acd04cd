"""MQAR accuracy (:mod:`suite.experiments.mqar.data`'s answer positions): overall, and split into answers near their
value and answers more than ``num_layers * (window - 1)`` tokens after it, which a sliding-window model cannot see (the
negative control of :mod:`suite.eval.controls`).
"""
from __future__ import annotations

import torch

from suite.experiments.mqar.data import query_distances


def slot_logits(model: torch.nn.Module, input_ids: torch.Tensor, slots: torch.Tensor | None = None) -> torch.Tensor:
    """Logits ``[B, T_sel, V]`` at the query ``slots`` (bool ``[T]``), or ``[B, T, V]`` when ``slots`` is None.
    The suite's models compute only the selected rows (``output_mask``); other models are sliced."""
    from models.backbone import SuiteForCausalLM

    if slots is not None and isinstance(model, SuiteForCausalLM):
        return model(input_ids=input_ids, output_mask=slots).logits
    out = model(input_ids=input_ids)
    logits = out.logits if hasattr(out, "logits") else out
    return logits if slots is None else logits[:, slots]


@torch.inference_mode()
def mqar_accuracy(model: torch.nn.Module, input_ids: torch.Tensor, labels: torch.Tensor, num_kv_pairs: int,
                  far_distance: int | None = None, batch_size: int = 64) -> dict:
    """Accuracy at the answer positions (argmax of the logits == label), overall and split by distance.

    Returns ``{"accuracy", "accuracy_near", "accuracy_far", "n_near", "n_far"}``: "far" answers lie more than
    ``far_distance`` tokens after their value (beyond a sliding-window model's receptive field); the split
    entries are None without ``far_distance`` or when a side is empty. ``model(input_ids=[B, T])`` returns
    logits ``[B, T, V]`` (or an object with ``.logits``); rows of one batch may share query slots.
    """
    was_training = model.training
    model.eval()
    device = next(model.parameters()).device
    hits, dists = [], []
    for start in range(0, len(input_ids), batch_size):
        ids, lab = input_ids[start:start + batch_size], labels[start:start + batch_size]
        slots = (lab != -100).any(0)
        pred = slot_logits(model, ids.to(device), slots).argmax(-1).cpu()
        sel = lab[:, slots]
        hits.append(pred[sel != -100] == sel[sel != -100])
        dists.append(query_distances(ids, lab, num_kv_pairs))
    model.train(was_training)
    hit, dist = torch.cat(hits).float(), torch.cat(dists)
    out = {"accuracy": float(hit.mean()), "accuracy_near": None, "accuracy_far": None, "n_near": None, "n_far": None}
    if far_distance is not None:
        far = dist > far_distance
        out.update(n_near=int((~far).sum()), n_far=int(far.sum()),
                   accuracy_near=float(hit[~far].mean()) if (~far).any() else None,
                   accuracy_far=float(hit[far].mean()) if far.any() else None)
    return out
