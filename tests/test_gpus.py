"""The GPU catalog (calculator/core/gpus.py, calculator/core/custom_gpu.py, `python -m calculator gpus`):
the cards people have, under the names they type, their PyTorch totals against the published
readings listed here by hand, and a card described only by its memory."""

from __future__ import annotations

import json
import statistics
import subprocess

import pytest

from calculator.core.errors import CalculatorError
from calculator.core.gpus import GROUPS, HOST_LINKS, gpu, gpu_count, gpus, host_link
from guide.case import parse_value, url_text
from tests.cli_runner import run_cli

MIB, GIB = 2**20, 2**30

# PyTorch totals read in public logs (OOM messages' "total capacity", get_device_properties,
# cudaDeviceProp), with nvidia-smi's total: (architecture, nvidia-smi MiB, PyTorch MiB, where).
PUBLISHED = [
    ("turing", 15360, 14909, "CatVTON#133: 14.56 GiB"),
    ("ada", 23034, 22569, "L4: 22.04 GiB"),
    ("ampere", 23028, 22589, "A10G: 22.06 GiB"),
    ("ampere", 24576, 24259, "RTX 3090: total_memory=24259MB"),
    ("ada", 24564, 24218, "RTX 4090: 23.65 GiB"),
    ("ampere", 40960, 40448, "CoSeR#10: 39.50 GiB"),
    ("ampere", 81920, 81050, "OOTDiffusion#235: 79.15 GiB"),
    ("hopper", 81559, 81080, "H100: 79.18 GiB"),
    ("hopper", 143771, 143156, "H200: total_memory=143156MB"),
    ("pascal", 16276, 16276, "P100: TensorFlow 15.90 GiB"),
    ("volta", 32510, 32502, "ChatGLM-Finetuning#73: 31.74 GiB"),
    ("ampere", 23028, 22518, "CogVLM#236: 21.99 GiB"),
    ("ampere", 24576, 24095, "RB-Modulation#5: 23.53 GiB"),
    ("hopper", 95830, 95232, "VACE#56: 93.00 GiB"),
    ("blackwell", 183359, 182630, "pytorch/ao#4002: 178.35 GiB"),
    ("ampere", 16376, 15985, "VGGT-Long#6: 15.61 GiB"),
    ("ada", 46068, 45496, "MTVCrafter#21: 44.43 GiB"),
    ("ampere", 12288, 12032, "dreambooth-gui#78: 11.75 GiB"),
    ("ampere", 10240, 10015, "CogVideo#34: 9.78 GiB"),
    ("ada", 16376, 16374, "EasyPhoto#281: 15.99 GiB"),
    ("ada", 46068, 45486, "Step-Video-T2V#8: 44.42 GiB"),
    ("blackwell", 32607, 32113, "TrajectoryCrafter#20: 31.36 GiB"),
    ("blackwell", 97887, 97249, "ds4#431: total=94.97 GiB"),
    ("blackwell", 16311, 15816, "lucebox#407: 15,816 MiB CUDA-visible"),
]
# The reservation (nvidia-smi less PyTorch) by architecture, worked out from the list above:
# Ampere 225 256 317 391 439 481 510 512 870 -> 439; Ada 2 346 465 572 582 -> 465; Hopper
# 479 598 615 -> 598; Blackwell 494 495 638 729 -> 566.5; Volta 8.
RESERVATION = {"ampere": 439, "ada": 465, "hopper": 598, "blackwell": 566, "volta": 8}

LINK_KEYS = ("t4", "l4", "a10g", "rtx3090", "rtx4090", "a100-40gb", "a100-80gb", "h100", "h200", "mi300x")


def test_the_published_list_gives_the_reservations_by_hand():
    for architecture, expected in RESERVATION.items():
        diffs = [smi - torch for arch, smi, torch, _ in PUBLISHED if arch == architecture]
        assert int(statistics.median(diffs)) == expected


def test_every_published_reading_is_in_the_catalog():
    pairs = {(c.memory_mib, c.torch_total_mib) for c in gpus().values() if c.total_basis == "published"}
    assert {(smi, torch) for _, smi, torch, _ in PUBLISHED} <= pairs


@pytest.mark.parametrize("key", [k for k, c in gpus().items() if c.total_basis == "rule" and c.group != "amd"])
def test_an_unpublished_total_follows_the_stated_rule(key):
    card = gpu(key)
    assert card.torch_total_mib == card.memory_mib - RESERVATION[card.architecture]
    assert card.total_source.startswith("Rule:") and str(RESERVATION[card.architecture]) in card.total_source


def test_amd_totals_follow_the_mi300x():
    # rocm-smi and PyTorch both report the MI300X's 192 GiB less 16 MiB (ROCm/ROCm#4203)
    for key, gib in (("mi300x", 192), ("mi250x", 64), ("mi325x", 256), ("mi355x", 288)):
        assert gpu(key).torch_total_mib == gpu(key).memory_mib == gib * 1024 - 16


@pytest.mark.parametrize("key,recommended_mib", [
    ("apple-m4-16gb", 10922.67),  # ggml_metal_init recommendedMaxWorkingSetSize = 10922.67 MB (16 GB)
    ("apple-m4max-64gb", 49152), ("apple-m3ultra-96gb", 73728),  # 49152.00 MiB, 73728,00 MB
    ("apple-m2ultra-192gb", 147456)])  # three quarters of 192 GiB
def test_apple_silicon_gets_metal_s_default_share(key, recommended_mib):
    card = gpu(key)
    assert abs(card.torch_total_mib - recommended_mib) < 1
    assert host_link(card) == ("unified memory", card.bandwidth_gbs)


def test_at_least_forty_cards_in_their_groups():
    cards = gpus()
    assert len(cards) >= 40
    assert len({c.name for c in cards.values()}) == len(cards)  # pickers write the name in the URL
    assert [c.group for c in cards.values()] == sorted((c.group for c in cards.values()), key=GROUPS.index)
    for group in GROUPS[:-1]:
        assert any(c.group == group for c in cards.values())
    wanted = ("p100 v100-16gb v100-32gb t4 a10 a10g a30 a40 l4 l40s a100-40gb a100-40gb-pcie a100-80gb "
              "a100-80gb-pcie h100 h100-pcie h100-nvl h200 gh200 h20 b200 b300 gb200 rtx-a4000 rtx-a5000 rtx-a6000 "
              "rtx6000-ada rtx-pro-6000 rtx3060 rtx3080 rtx3090 rtx4060ti-16gb rtx4070 rtx4070ti-super rtx4080 rtx4090 "
              "rtx5060ti-16gb rtx5070 rtx5070ti rtx5080 rtx5090 mi250x mi300x mi325x mi355x").split()
    assert set(wanted) <= set(cards)


def test_keys_in_links_keep_their_card():
    names = {"t4": "NVIDIA T4", "l4": "NVIDIA L4", "a10g": "NVIDIA A10G", "rtx3090": "NVIDIA GeForce RTX 3090",
             "rtx4090": "NVIDIA GeForce RTX 4090", "a100-40gb": "NVIDIA A100 40GB SXM",
             "a100-80gb": "NVIDIA A100 80GB SXM", "h100": "NVIDIA H100 SXM", "h200": "NVIDIA H200 SXM",
             "mi300x": "AMD Instinct MI300X"}
    assert {key: gpu(key).name for key in LINK_KEYS} == names


@pytest.mark.parametrize("key", list(gpus()))
def test_every_card_resolves_from_its_key_and_names(key):
    card = gpus()[key]
    assert gpu(key) is card and gpu(card.name).key == key and gpu(card.name.upper()).key == key
    bare = card.name.replace("NVIDIA ", "").replace("GeForce ", "").replace("AMD Instinct ", "")
    assert gpu(bare).key == key
    assert card.total_source and card.source and card.bandwidth_gbs > 0 and card.fp32_tflops > 0


@pytest.mark.parametrize("typed,key", [
    ("RTX 5090", "rtx5090"), ("5090", "rtx5090"), ("B200", "b200"), ("MI355X", "mi355x"), ("H100 PCIe", "h100-pcie"),
    ("h100 nvl", "h100-nvl"), ("GB200", "gb200"), ("B300", "b300"), ("GH200", "gh200"), ("H20", "h20"),
    ("L40S", "l40s"), ("A6000", "rtx-a6000"), ("RTX 6000 Ada", "rtx6000-ada"), ("RTX PRO 6000", "rtx-pro-6000"),
    ("3060", "rtx3060"), ("4060 Ti", "rtx4060ti-16gb"), ("4070 Ti Super", "rtx4070ti-super"), ("5070 Ti", "rtx5070ti"),
    ("V100 16GB", "v100-16gb"), ("Tesla P100", "p100"), ("MI250X", "mi250x"), ("A100 80GB PCIe", "a100-80gb-pcie"),
    ("Colab T4", "t4"), ("Kaggle 2×T4", "t4"), ("Kaggle P100", "p100"), ("A10", "a10"), ("A10G", "a10g")])
def test_names_people_type(typed, key):
    assert gpu(typed).key == key


def test_platforms_give_their_count():
    assert gpu_count("Kaggle 2×T4") == gpu_count("kaggle t4x2") == 2
    assert gpu_count("Colab T4") == gpu_count("t4") == gpu_count("custom:12GiB") == 1


def test_an_ambiguous_name_lists_what_it_could_mean():
    with pytest.raises(CalculatorError) as error:
        gpu("V100")
    assert "v100-16gb" in str(error.value) and "v100-32gb" in str(error.value) and "12GiB" in str(error.value)


@pytest.mark.parametrize("key", ["p100", "v100-16gb", "v100-32gb", "t4"])
def test_bfloat16_before_ampere_runs_at_the_float32_rate(key):
    card = gpu(key)
    assert not card.has_bf16_tensor_cores
    assert card.matmul_tflops("bfloat16") == card.matmul_tflops("float32") == card.fp32_tflops
    assert card.matmul_tflops("float16") == card.fp16_tflops > card.fp32_tflops


def test_every_card_has_its_host_link():
    assert set(HOST_LINKS) == {k for k, c in gpus().items() if c.group != "apple"}
    assert host_link(gpu("gh200")) == ("NVLink-C2C", 450.0)  # 900 GB/s both directions added
    assert host_link(gpu("rtx5060ti-16gb")) == ("PCIe 5.0 x8", 32.0)


# -- a card typed by its memory -----------------------------------------------------------

def test_a_custom_card_round_trips_through_the_url():
    key = parse_value("gpu", "12GiB")
    assert key == "custom:12GiB" == parse_value("gpu", url_text("gpu", key))
    typed = parse_value("gpu", "custom:12 GiB:360 GB/s")
    assert typed == "custom:12GiB:360GB/s" == parse_value("gpu", typed)
    card = gpu(typed)
    # the nearest catalog card in memory is the RTX 3060 (12288 MiB, Ampere): 439 MiB reserved
    assert (card.memory_bytes, card.total_bytes) == (12 * GIB, 12 * GIB - 439 * MIB)
    assert card.bandwidth_gbs == 360 and card.fp16_tflops == gpu("rtx3060").fp16_tflops
    assert gpu("24GB").memory_mib == 24 * 10**9 // MIB  # GB is 10^9 bytes


@pytest.mark.parametrize("text", ["custom:0.5GiB", "custom:5TiB", "custom:12GiB:0GB/s", "custom:12GiB:fast",
                                  "custom:12GiB:1:2", "custom:", "9999999999GiB"])
def test_a_custom_card_that_cannot_be_read_is_refused(text):
    with pytest.raises(CalculatorError) as error:
        gpu(text)
    assert error.value.code in ("bad_custom_gpu", "unknown_gpu") and error.value.message("fr")
    with pytest.raises(ValueError):
        parse_value("gpu", text)


def _cli(*args: str) -> subprocess.CompletedProcess:
    return run_cli(*args)  # in this process (tests/cli_runner.py)


def test_the_cli_takes_a_custom_card_and_lists_the_catalog():
    done = _cli("estimate", "gpt2", "--gpu", "custom:12GiB:360GB/s", "--json")
    assert done.returncode == 0, done.stderr
    card = gpu("custom:12GiB:360GB/s")
    data = json.loads(done.stdout)
    assert data["gpu"] == card.key and data["usable_bytes"] == 12 * GIB - 439 * MIB - card.context_bytes
    listed = _cli("gpus", "--json")
    rows = json.loads(listed.stdout)["gpus"]
    assert [r["key"] for r in rows] == list(gpus())
    t4 = rows[0]
    assert t4["key"] == "t4" and t4["torch_total_bytes"] == 14909 * MIB
    assert t4["usable_bytes"] == t4["torch_total_bytes"] - t4["context_bytes"]
    assert {"name", "memory_bytes", "bandwidth_gbs", "architecture", "source", "total_source", "group"} <= set(t4)
    bad = _cli("estimate", "gpt2", "--gpu", "custom:12GiB:fast")
    assert bad.returncode == 2 and bad.stderr.count("\n") == 1 and "Traceback" not in bad.stderr


def test_the_case_bar_takes_a_typed_card_and_groups_the_others():
    from tests.apptest import open_page

    at = open_page("oom", "fr", gpu="12GiB", model="gpt2")
    assert not at.exception
    picker = at.selectbox(key="case_gpu")
    assert picker.value == "custom:12GiB"
    assert picker.options[0].startswith("Votre carte · GPU custom:12GiB")
    assert any(o.startswith("Centre de données · NVIDIA B200") for o in picker.options)
    assert any(o.startswith("Apple silicon (part de la mémoire unifiée laissée au GPU) · Apple M4 (16 GB)")
               for o in picker.options)


def test_a_platform_s_count_reaches_the_commands_that_take_one():
    for args in (("offload", "gpt2", "--gpu", "Kaggle 2×T4"), ("data-parallel", "gpt2", "--gpu", "kaggle 2xt4",
                                                                   "--samples", "100")):
        done = _cli(*args, "--json")
        assert done.returncode == 0, done.stderr
        assert json.loads(done.stdout)["gpus"] == 2
    done = _cli("offload", "gpt2", "--gpu", "Kaggle 2×T4", "--gpus", "3", "--json")
    assert json.loads(done.stdout)["gpus"] == 3  # the reader's own count wins


def test_estimate_on_a_platform_says_its_verdicts_are_one_cards():
    """`estimate` has no GPU count: on "Kaggle 2×T4" it says its verdicts are one T4's and gives
    the command that places the model across both; a card's own name says nothing of the kind."""
    text = _cli("estimate", "qwen3-8b", "--gpu", "Kaggle 2xT4").stdout
    assert "Kaggle 2xT4 is 2 x NVIDIA T4: the verdicts above are one card's" in text
    assert "`python -m calculator offload qwen3-8b --gpu t4 --gpus 2`" in text
    assert "verdicts above are one card's" not in _cli("estimate", "qwen3-8b", "--gpu", "t4").stdout
