"""Preflight fails a job in a second when its port is taken or its GPUs are not there."""

from __future__ import annotations

import json
import socket
import stat
from pathlib import Path

import pytest

from llmsweep.engines.launch import LaunchSpec
from llmsweep.errors import LaunchError
from llmsweep.execute.preflight import check_gpus, port_is_free, resolve_port


def spec(argv: tuple[str, ...], port: int, **kw: object) -> LaunchSpec:
    return LaunchSpec(engine="vllm", argv=argv, port=port, **kw)


def test_taken_port_is_reported_with_a_fix() -> None:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        sock.listen()
        port = sock.getsockname()[1]
        assert not port_is_free(port)
        with pytest.raises(LaunchError) as err:
            resolve_port(spec(("srv", "--port", str(port)), port))
    assert str(port) in err.value.message and "delete the recipe's `serve.port`" in (err.value.fix or "")


def test_free_port_is_kept() -> None:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    s = spec(("srv", "--port", str(port)), port)
    assert resolve_port(s) is s


def test_port_zero_is_replaced_everywhere_the_adapter_put_it() -> None:
    s = spec(("srv", "--port", "0", "--port=0", "--url=http://h:{port}/x", "--other", "0"), 0,
             env={"PORT": "{port}", "KEEP": "0"})
    resolved = resolve_port(s)
    port = resolved.port
    assert port > 0 and port_is_free(port)
    assert resolved.argv == ("srv", "--port", str(port), f"--port={port}", f"--url=http://h:{port}/x", "--other", "0")
    assert resolved.env == {"PORT": str(port), "KEEP": "0"}
    assert resolved.base_url.endswith(f":{port}")


def fake_tool(directory: Path, name: str, output: str) -> None:
    """A stand-in vendor tool; uses only shell builtins, so PATH can be just `directory` (no real tool leaks in)."""
    path = directory / name
    path.write_text(f"#!/bin/sh\nprintf '%s\\n' '{output}'\n")
    path.chmod(path.stat().st_mode | stat.S_IEXEC)


def test_gpu_check_skips_simulator_and_cpu_servers(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.setenv("PATH", str(tmp_path))
    check_gpus(spec(("sim",), 1, gpus=8).model_copy(update={"engine": "sim"}))
    check_gpus(spec(("srv",), 1, gpus=0))


def test_gpu_check_fails_without_vendor_tools(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.setenv("PATH", str(tmp_path))
    with pytest.raises(LaunchError, match="none of nvidia-smi, amd-smi and rocm-smi is on PATH"):
        check_gpus(spec(("srv",), 1, gpus=1))


def test_gpu_check_counts_nvidia_gpus_and_honours_visible_devices(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    fake_tool(tmp_path, "nvidia-smi", "GPU 0: NVIDIA H200 (UUID: GPU-a)\nGPU 1: NVIDIA H200 (UUID: GPU-b)")
    monkeypatch.setenv("PATH", str(tmp_path))
    monkeypatch.delenv("CUDA_VISIBLE_DEVICES", raising=False)
    check_gpus(spec(("srv",), 1, gpus=2))
    with pytest.raises(LaunchError, match=r"needs 4 GPU.*nvidia-smi shows 2"):
        check_gpus(spec(("srv",), 1, gpus=4))
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "1")
    with pytest.raises(LaunchError, match="shows 1 visible"):
        check_gpus(spec(("srv",), 1, gpus=2))


def test_gpu_check_counts_rocm_gpus(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    listing = "GPU[0]\t\t: Device ID: 0x74a1\nGPU[0]\t\t: Device Rev: 0x00\nGPU[1]\t\t: Device ID: 0x74a1"
    fake_tool(tmp_path, "rocm-smi", listing)
    monkeypatch.setenv("PATH", str(tmp_path))
    for name in ("CUDA_VISIBLE_DEVICES", "HIP_VISIBLE_DEVICES", "ROCR_VISIBLE_DEVICES"):
        monkeypatch.delenv(name, raising=False)
    check_gpus(spec(("srv",), 1, gpus=2))
    with pytest.raises(LaunchError, match="rocm-smi shows 2"):
        check_gpus(spec(("srv",), 1, gpus=8))


def test_preflight_resolves_the_port_and_checks_gpus(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    from llmsweep.execute.preflight import preflight

    monkeypatch.setenv("PATH", str(tmp_path))
    ready = preflight(spec(("srv", "--port", "0"), 0))
    assert ready.port > 0 and ready.argv[-1] == str(ready.port)
    with pytest.raises(LaunchError, match="GPU"):
        preflight(spec(("srv", "--port", "0"), 0, gpus=2))
    assert preflight(spec(("srv", "--port", "0"), 0, gpus=2), gpus=False).port > 0


def test_gpu_check_counts_the_gpus_the_runtime_would_show(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    """The count follows the selection as CUDA and ROCm apply it (`llmsweep.visible`), not the number of entries: a
    mistyped UUID is refused before launch with the entry named (CUDA stops at it, so the engine would have seen one
    GPU of the two counted), an empty CUDA_VISIBLE_DEVICES shows none, and on AMD HIP's indices count within what
    ROCR left."""
    fake_tool(tmp_path, "nvidia-smi",
              "GPU 0: NVIDIA H200 (UUID: GPU-aaaa1111)\nGPU 1: NVIDIA H200 (UUID: GPU-bbbb2222)")
    monkeypatch.setenv("PATH", str(tmp_path))
    for name in ("CUDA_VISIBLE_DEVICES", "HIP_VISIBLE_DEVICES", "ROCR_VISIBLE_DEVICES"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "GPU-bbbb,GPU-aaaa")  # unique prefixes: both GPUs
    check_gpus(spec(("srv",), 1, gpus=2))
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "0,GPU-cccc")
    with pytest.raises(LaunchError, match="GPU-cccc, which no GPU of this host has"):
        check_gpus(spec(("srv",), 1, gpus=2))
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "")
    with pytest.raises(LaunchError, match="set and empty"):
        check_gpus(spec(("srv",), 1, gpus=1))


def test_gpu_check_on_amd_counts_hip_within_rocr(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    listing = "\n".join(f"GPU[{i}]\t\t: Device ID: 0x74a1" for i in range(4))
    fake_tool(tmp_path, "rocm-smi", listing)
    monkeypatch.setenv("PATH", str(tmp_path))
    monkeypatch.delenv("CUDA_VISIBLE_DEVICES", raising=False)
    monkeypatch.setenv("ROCR_VISIBLE_DEVICES", "0,1,2,3")
    monkeypatch.setenv("HIP_VISIBLE_DEVICES", "1")
    with pytest.raises(LaunchError, match=r"needs 2 GPU.*rocm-smi shows 1 visible"):
        check_gpus(spec(("srv",), 1, gpus=2))
    monkeypatch.setenv("HIP_VISIBLE_DEVICES", "1,3")
    check_gpus(spec(("srv",), 1, gpus=2))


def test_a_gpu_shortfall_fix_names_what_sets_the_gpus_where_the_server_runs(monkeypatch: pytest.MonkeyPatch,
                                                                            tmp_path: Path) -> None:
    """Off Slurm the GPUs are this machine's selection (the docker executor passes it on); inside a batch job they
    are what its --gres asked for, which llmsweep already sets from tp/pp: telling that user to pass --gres, or a
    local user to request an allocation, sent each to the wrong knob."""
    fake_tool(tmp_path, "nvidia-smi", "GPU 0: NVIDIA H200 (UUID: GPU-a)")
    monkeypatch.setenv("PATH", str(tmp_path))
    monkeypatch.delenv("CUDA_VISIBLE_DEVICES", raising=False)
    monkeypatch.delenv("SLURM_JOB_ID", raising=False)
    with pytest.raises(LaunchError) as local:
        check_gpus(spec(("srv",), 1, gpus=2))
    assert "CUDA_VISIBLE_DEVICES" in str(local.value.fix) and "gres" not in str(local.value.fix)
    monkeypatch.setenv("SLURM_JOB_ID", "42")
    with pytest.raises(LaunchError) as node:
        check_gpus(spec(("srv",), 1, gpus=2))
    assert "--gres=gpu:2" in str(node.value.fix) and "gres.conf" in str(node.value.fix)
    monkeypatch.setenv("PATH", str(tmp_path / "none"))
    with pytest.raises(LaunchError) as no_tools:
        check_gpus(spec(("srv",), 1, gpus=2))
    assert "partition" in str(no_tools.value.fix)


def test_gpu_check_counts_the_selection_the_recipe_gives_the_server(monkeypatch: pytest.MonkeyPatch,
                                                                     tmp_path: Path) -> None:
    """The server runs with the recipe's env over this process's (`{**os.environ, **spec.env}`), so a
    CUDA_VISIBLE_DEVICES the recipe sets is the one counted: a tp=2 job whose recipe pins one GPU of a 2-GPU host is
    refused before launch (the engine would see one), and one whose recipe names both GPUs is not refused for an
    empty selection left in the shell."""
    fake_tool(tmp_path, "nvidia-smi", "GPU 0: NVIDIA H200 (UUID: GPU-a)\nGPU 1: NVIDIA H200 (UUID: GPU-b)")
    monkeypatch.setenv("PATH", str(tmp_path))
    monkeypatch.delenv("CUDA_VISIBLE_DEVICES", raising=False)
    with pytest.raises(LaunchError, match="shows 1 visible under the recipe's CUDA_VISIBLE_DEVICES=1") as err:
        check_gpus(spec(("srv",), 1, gpus=2, env={"CUDA_VISIBLE_DEVICES": "1"}))
    assert "serve.env" in (err.value.fix or "")
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "")
    check_gpus(spec(("srv",), 1, gpus=2, env={"CUDA_VISIBLE_DEVICES": "0,1"}))



def test_gpu_check_refuses_an_index_this_host_does_not_have(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    """CUDA (and ROCm) stop at an index past the host's GPUs, hiding it and every entry after it: under
    CUDA_VISIBLE_DEVICES=0,7,1 on a 2-GPU host the engine sees GPU 0 alone. Counting the entries the host has (0 and
    1) let a tp=2 job through to fail after start-up; it is refused before launch, the entry named."""
    fake_tool(tmp_path, "nvidia-smi", "GPU 0: NVIDIA H200 (UUID: GPU-a)\nGPU 1: NVIDIA H200 (UUID: GPU-b)")
    monkeypatch.setenv("PATH", str(tmp_path))
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "0,7,1")
    with pytest.raises(LaunchError) as err:
        check_gpus(spec(("srv",), 1, gpus=2))
    assert "CUDA_VISIBLE_DEVICES=0,7,1" in err.value.message and "7" in err.value.message
    assert "nvidia-smi lists 2 GPUs" in err.value.message and "name GPUs this node has" in (err.value.fix or "")
    listing = "\n".join(f"GPU[{i}]\t\t: Device ID: 0x74a1" for i in range(2))
    (tmp_path / "nvidia-smi").unlink()
    fake_tool(tmp_path, "rocm-smi", listing)
    monkeypatch.delenv("CUDA_VISIBLE_DEVICES")
    monkeypatch.setenv("HIP_VISIBLE_DEVICES", "1,2")
    with pytest.raises(LaunchError, match=r"HIP_VISIBLE_DEVICES=1,2.*\b2\b.*rocm-smi"):
        check_gpus(spec(("srv",), 1, gpus=1))


def busy_nvidia_smi(directory: Path, apps: str, *, apps_exit: int = 0, mig_on_1: bool = False) -> None:
    """A stand-in nvidia-smi of two GPUs whose `--query-compute-apps` prints `apps` (CSV rows); `mig_on_1`: GPU 1
    is split into MIG instances."""
    path = directory / "nvidia-smi"
    listing = "GPU 0: NVIDIA H200 (UUID: GPU-aaaa1111)\\nGPU 1: NVIDIA H200 (UUID: GPU-bbbb2222)\\n"
    if mig_on_1:
        listing += ("  MIG 3g.71gb     Device  0: (UUID: MIG-11111111-aaaa-4aaa-8aaa-aaaaaaaaaaaa)\\n"
                    "  MIG 3g.71gb     Device  1: (UUID: MIG-22222222-aaaa-4aaa-8aaa-aaaaaaaaaaaa)\\n")
    path.write_text("#!/bin/sh\ncase \"$1\" in\n"
                    f"  -L) printf '{listing}';;\n"
                    f"  --query-compute-apps=*) printf '%s' '{apps}'; exit {apps_exit};;\n"
                    "esac\n")
    path.chmod(path.stat().st_mode | stat.S_IEXEC)


def test_a_gpu_another_process_computes_on_is_refused_before_launch(monkeypatch: pytest.MonkeyPatch,
                                                                    tmp_path: Path) -> None:
    """On a shared node a GPU the server would use may hold another process (someone's notebook, a server a killed
    run left): the engine then fails to fit its memory after loading its weights, or is measured beside another
    workload. It is refused before launch with the GPU, the pid and what to do; a GPU the server would not use (past
    its tp x pp, outside its selection) does not matter, nor does the MPS control daemon, nor a query that fails."""
    busy_nvidia_smi(tmp_path, "GPU-bbbb2222, 4242, 71234, /usr/bin/python3\n")
    monkeypatch.setenv("PATH", str(tmp_path))
    for name in ("CUDA_VISIBLE_DEVICES", "HIP_VISIBLE_DEVICES", "ROCR_VISIBLE_DEVICES"):
        monkeypatch.delenv(name, raising=False)
    check_gpus(spec(("srv",), 1, gpus=1))  # the engine takes GPU 0 (the first visible one): free
    with pytest.raises(LaunchError) as err:
        check_gpus(spec(("srv",), 1, gpus=2))
    assert "GPU 1 (GPU-bbbb2222)" in err.value.message and "pid 4242 (/usr/bin/python3, 71234 MiB)" in err.value.message
    assert "CUDA_VISIBLE_DEVICES" in (err.value.fix or "") and "4242" in (err.value.fix or "")
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "1")
    with pytest.raises(LaunchError, match="pid 4242"):
        check_gpus(spec(("srv",), 1, gpus=1))
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "0")
    check_gpus(spec(("srv",), 1, gpus=1))
    monkeypatch.delenv("CUDA_VISIBLE_DEVICES")
    monkeypatch.setenv("SLURM_JOB_ID", "42")  # in a batch job the GPUs are the allocation's: the node is the problem
    monkeypatch.setenv("SLURMD_NODENAME", "gpu-17")
    with pytest.raises(LaunchError) as in_slurm:
        check_gpus(spec(("srv",), 1, gpus=2))
    assert "--executor-option 'exclude=[gpu-17]'" in (in_slurm.value.fix or "")
    monkeypatch.delenv("SLURM_JOB_ID")
    busy_nvidia_smi(tmp_path, "GPU-aaaa1111, 77, 30, nvidia-cuda-mps-server\nGPU-bbbb2222, 78, 30, "
                              "nvidia-cuda-mps-server\n")
    check_gpus(spec(("srv",), 1, gpus=2))
    busy_nvidia_smi(tmp_path, "Failed to initialize NVML\n", apps_exit=9)
    check_gpus(spec(("srv",), 1, gpus=2))
    # a MIG instance is not told apart by the query (it names the GPU): another user's process on the other
    # instance of a split GPU is no reason to refuse this one
    busy_nvidia_smi(tmp_path, "GPU-bbbb2222, 4242, 30000, python3\n", mig_on_1=True)
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "MIG-11111111-aaaa-4aaa-8aaa-aaaaaaaaaaaa")
    check_gpus(spec(("srv",), 1, gpus=1))


def test_a_selection_llmsweep_chose_is_refused_with_how_to_choose_others(monkeypatch: pytest.MonkeyPatch,
                                                                          tmp_path: Path) -> None:
    """A role-by-role deployment's worker is given its GPUs by llmsweep (`reselect`): a refusal's fix says how to
    choose others, never to edit a `serve.env` selection the recipe does not set, and a shortfall is said under the
    worker's own selection, not the recipe's."""
    busy_nvidia_smi(tmp_path, "GPU-bbbb2222, 4242, 71234, /usr/bin/python3\n")
    monkeypatch.setenv("PATH", str(tmp_path))
    for name in ("CUDA_VISIBLE_DEVICES", "HIP_VISIBLE_DEVICES", "ROCR_VISIBLE_DEVICES", "SLURM_JOB_ID"):
        monkeypatch.delenv(name, raising=False)
    worker = spec(("srv",), 1, gpus=1, env={"CUDA_VISIBLE_DEVICES": "1"})
    with pytest.raises(LaunchError, match="pid 4242") as err:
        check_gpus(worker, reselect="give the deployment free GPUs with X")
    assert err.value.fix == "stop or wait for pid 4242 (`nvidia-smi` shows what runs where), or give the " \
                            "deployment free GPUs with X"
    with pytest.raises(LaunchError) as short:
        check_gpus(worker.model_copy(update={"gpus": 2}), reselect="give the deployment free GPUs with X")
    assert "shows 1 visible under its CUDA_VISIBLE_DEVICES=1" in short.value.message
    assert short.value.fix == "give the deployment free GPUs with X, or lower tp/pp in the recipe"


def test_a_selection_that_hides_every_gpu_says_so_and_where_it_is_set(monkeypatch: pytest.MonkeyPatch,
                                                                      tmp_path: Path) -> None:
    """CUDA_VISIBLE_DEVICES=-1 (or set and empty) is how a process is kept off every GPU; a server that needs GPUs is
    refused saying that the selection hides every GPU, and the fix names the variable where it is set (this shell or
    the recipe's `serve.env`), not "the variable"; -1 was "-1, which no GPU of this host has", after listing the
    host's GPU UUIDs for it."""
    fake_tool(tmp_path, "nvidia-smi", "GPU 0: NVIDIA H200 (UUID: GPU-a)\nGPU 1: NVIDIA H200 (UUID: GPU-b)")
    monkeypatch.setenv("PATH", str(tmp_path))
    for name in ("CUDA_VISIBLE_DEVICES", "HIP_VISIBLE_DEVICES", "ROCR_VISIBLE_DEVICES"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "-1")
    with pytest.raises(LaunchError) as shell:
        check_gpus(spec(("srv",), 1, gpus=2))
    assert "the vllm server needs GPUs, but the GPU selection is unusable: CUDA_VISIBLE_DEVICES=-1 hides every GPU" \
        in shell.value.message
    assert shell.value.fix == ("name GPUs this node has in this shell's CUDA_VISIBLE_DEVICES (indices or UUIDs from "
                               "nvidia-smi -L / amd-smi list), or unset it there")
    monkeypatch.delenv("CUDA_VISIBLE_DEVICES")
    for pinned in ("-1", ""):
        with pytest.raises(LaunchError, match="hides every GPU") as recipe:
            check_gpus(spec(("srv",), 1, gpus=1, env={"CUDA_VISIBLE_DEVICES": pinned}))
        assert "in the recipe's `serve.env` CUDA_VISIBLE_DEVICES" in (recipe.value.fix or "")
    with pytest.raises(LaunchError, match=r"CUDA_VISIBLE_DEVICES=1,-1 names -1, which is no GPU index"):
        check_gpus(spec(("srv",), 1, gpus=1, env={"CUDA_VISIBLE_DEVICES": "1,-1"}))


def test_an_unusable_selection_inside_a_slurm_job_sends_the_user_to_the_node_not_the_shell(
        monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    """In a batch job Slurm sets CUDA_VISIBLE_DEVICES from the job's --gres: a value naming GPUs the node does not
    list (gres.conf's device files against a cgroup that renumbers them) was met with "name GPUs … in this shell's
    CUDA_VISIBLE_DEVICES or unset it there", a shell the user never had. The fix names the node's gres.conf,
    `scontrol show node` and how to leave the node out; a selection the recipe pins is still the recipe's to fix."""
    fake_tool(tmp_path, "nvidia-smi", "GPU 0: NVIDIA H200 (UUID: GPU-a)\nGPU 1: NVIDIA H200 (UUID: GPU-b)")
    monkeypatch.setenv("PATH", str(tmp_path))
    for name in ("HIP_VISIBLE_DEVICES", "ROCR_VISIBLE_DEVICES"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("SLURM_JOB_ID", "42")
    monkeypatch.setenv("SLURMD_NODENAME", "gpu7")
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "4,5")
    with pytest.raises(LaunchError, match="the GPU selection is unusable: CUDA_VISIBLE_DEVICES=4,5") as slurm:
        check_gpus(spec(("srv",), 1, gpus=2))
    fix = slurm.value.fix or ""
    assert "this shell" not in fix and fix.startswith("CUDA_VISIBLE_DEVICES in this Slurm job is Slurm's, set from "
                                                      "the GPUs of its --gres"), fix
    for said in ("gres.conf", "`scontrol show node gpu7`", "ConstrainDevices", "--executor-option 'exclude=[gpu7]'"):
        assert said in fix, (said, fix)
    monkeypatch.delenv("CUDA_VISIBLE_DEVICES")
    with pytest.raises(LaunchError) as pinned:
        check_gpus(spec(("srv",), 1, gpus=1, env={"CUDA_VISIBLE_DEVICES": "4"}))
    assert pinned.value.fix == ("name GPUs this node has in the recipe's `serve.env` CUDA_VISIBLE_DEVICES (indices or "
                                "UUIDs from nvidia-smi -L / amd-smi list), or unset it there")


def test_a_uuid_the_listing_lacks_is_refused_without_listing_the_host_again(monkeypatch: pytest.MonkeyPatch,
                                                                              tmp_path: Path) -> None:
    """`nvidia-smi -L` lists every GPU's and MIG instance's UUID: a selection entry it lacks names no GPU of this host,
    said after that one listing (it was listed a second time to look the entry up, and named twice as the source)."""
    import sys

    log = tmp_path / "calls.log"
    tool = tmp_path / "nvidia-smi"
    tool.write_text(f"#!/bin/sh\necho \"$*\" >> {log}\nprintf 'GPU 0: NVIDIA H200 (UUID: GPU-aaaa1111)\\n'\n")
    tool.chmod(tool.stat().st_mode | stat.S_IEXEC)
    monkeypatch.setenv("PATH", str(tmp_path))
    monkeypatch.setitem(sys.modules, "pynvml", None)
    with pytest.raises(LaunchError) as err:
        check_gpus(spec(("srv",), 1, gpus=1, env={"CUDA_VISIBLE_DEVICES": "GPU-bbbb"}))
    assert err.value.message.endswith("names GPU-bbbb, which no GPU of this host has (listed by nvidia-smi -L)")
    assert log.read_text().splitlines() == ["-L"]


# Four MI300X (device id 0x74a1): the unique id ROCr's UUID carries (`GPU-<serial>`), from which amd-smi builds its own
# UUID (`<serial byte 7>ff74a1-0000-1000-80<serial byte 6>-<serial bytes 5..0>`).
AMD_SERIALS = ("5bf1a8c2e4d60917", "92c4e07b3a1f5d28", "e8d7c6b5a4938271", "0a1b2c3d4e5f6071")
GROUP_WARNING = ("WARNING: User is missing the following required groups: render, video. Please add user to these "
                 "groups.")


def amd_smi_list(era: str, *, enumeration: bool, in_groups: bool = True) -> str:
    """`amd-smi list [-e] --json` as amd-smi prints it (the fields of `amdsmi_commands.list`, paraphrased): `6.0` a
    list of `gpu`, `bdf`, `uuid` (amd-smi 23.x/24.x, no `-e`); `6.4` a list that adds the KFD ids, and with `-e` the
    DRM, HSA and HIP enumeration (`hip_uuid`: ROCr's UUID); `7.x` the same objects wrapped in `gpu_data`. A user
    outside the render and video groups gets the warning on stdout first and `N/A` for every UUID and BDF."""
    entries = []
    for i, serial in enumerate(AMD_SERIALS):
        entry: dict[str, object] = {
            "gpu": i, "bdf": f"0000:{0x0c + 0x20 * i:02x}:00.0" if in_groups else "N/A",
            "uuid": f"{serial[:2]}ff74a1-0000-1000-80{serial[2:4]}-{serial[4:]}" if in_groups else "N/A"}
        if era != "6.0":
            entry |= {"kfd_id": 28870 + 1000 * i, "node_id": 2 + i, "partition_id": 0}
        if enumeration:
            entry |= {"render": f"renderD{128 + 8 * i}", "card": f"card{i}", "hsa_id": 2 + i, "hip_id": i,
                      "hip_uuid": f"GPU-{serial}" if in_groups else "N/A"}
        entries.append(entry)
    doc = json.dumps({"gpu_data": entries} if era == "7.x" else entries, indent=4)
    return doc if in_groups else f"{GROUP_WARNING}\n{doc}"


def fake_amd_smi(directory: Path, era: str, *, in_groups: bool = True, broken: bool = False) -> Path:
    """A stand-in amd-smi of shell builtins only: `list [-e] --json` as `amd_smi_list` prints it (the 6.0-era one
    refuses `-e`, as argparse does); `broken`, every command fails as an amd-smi whose library cannot start does.
    Anything else it is asked is logged to the returned file and answered with a CSV row of a process on GPU 0, as
    nvidia-smi's `--query-compute-apps` would print one."""
    asked = directory / "amd-smi.asked"
    no_e = ('echo "amd-smi: error: unrecognized arguments: -e" >&2; exit 2' if era == "6.0" else
            f"printf '%s\\n' '{amd_smi_list(era, enumeration=True, in_groups=in_groups)}'")
    body = ('echo "AMDSMI_STATUS_INIT_ERROR: could not initialize amdsmi" >&2; exit 1\n' if broken else
            f"case \"$*\" in\n"
            f"  'list -e --json') {no_e};;\n"
            f"  'list --json') printf '%s\\n' '{amd_smi_list(era, enumeration=False, in_groups=in_groups)}';;\n"
            f"  *) echo \"$*\" >> {asked}; printf '%s\\n' 'GPU-{AMD_SERIALS[0]}, 4242, 1000, python3';;\n"
            "esac\n")
    path = directory / "amd-smi"
    path.write_text(f"#!/bin/sh\n{body}")
    path.chmod(path.stat().st_mode | stat.S_IEXEC)
    return asked


@pytest.mark.parametrize(("era", "in_groups"), [("6.0", True), ("6.4", True), ("7.x", True), ("6.4", False)])
def test_an_amd_host_with_amd_smi_alone_is_checked_by_what_amd_smi_lists(monkeypatch: pytest.MonkeyPatch,
                                                                          tmp_path: Path, era: str,
                                                                          in_groups: bool) -> None:
    """ROCm 7.x deprecates rocm-smi and a host may have amd-smi alone, which the lifecycle already reads the GPUs
    with: the preflight lists them with `amd-smi list -e --json` (`list --json` where an older amd-smi has no `-e`),
    in every shape it prints (a list, or 7.x's `gpu_data` wrapper; a group warning before it, and `N/A` UUIDs, for a
    user outside the render and video groups), and counts the selection within them. It was refused as a host
    without vendor tools. Nothing NVIDIA's is asked of amd-smi (no process query: `_refuse_busy` says why)."""
    asked = fake_amd_smi(tmp_path, era, in_groups=in_groups)
    monkeypatch.setenv("PATH", str(tmp_path))
    for name in ("CUDA_VISIBLE_DEVICES", "HIP_VISIBLE_DEVICES", "ROCR_VISIBLE_DEVICES", "SLURM_JOB_ID"):
        monkeypatch.delenv(name, raising=False)
    check_gpus(spec(("srv",), 1, gpus=4))
    with pytest.raises(LaunchError, match=r"needs 8 GPUs but amd-smi shows 4 visible"):
        check_gpus(spec(("srv",), 1, gpus=8))
    monkeypatch.setenv("ROCR_VISIBLE_DEVICES", "2,3")
    monkeypatch.setenv("HIP_VISIBLE_DEVICES", "1")  # HIP counts within what ROCR left: GPU 3
    with pytest.raises(LaunchError, match=r"needs 2 GPUs but amd-smi shows 1 visible"):
        check_gpus(spec(("srv",), 1, gpus=2))
    monkeypatch.delenv("HIP_VISIBLE_DEVICES")
    by_uuid = f"GPU-{AMD_SERIALS[3]},GPU-{AMD_SERIALS[1][:6]}"  # ROCr's UUIDs, the second by a unique prefix
    monkeypatch.setenv("ROCR_VISIBLE_DEVICES", by_uuid)
    if in_groups:  # amd-smi said every GPU's UUID: the selection is two of them
        check_gpus(spec(("srv",), 2, gpus=2))
    else:  # it said none: the entry names no GPU the host's tools know, never "every GPU"
        with pytest.raises(LaunchError, match=f"ROCR_VISIBLE_DEVICES={by_uuid} names .*which no GPU of this host"):
            check_gpus(spec(("srv",), 2, gpus=2))
    assert not asked.exists(), asked.read_text()


def test_an_amd_smi_that_fails_is_followed_by_rocm_smi_and_else_said(monkeypatch: pytest.MonkeyPatch,
                                                                     tmp_path: Path) -> None:
    """An amd-smi that cannot list the GPUs leaves them to rocm-smi where it is there; alone, its failure is the
    refusal (with what it said), not "no vendor tool"."""
    fake_amd_smi(tmp_path, "7.x", broken=True)
    monkeypatch.setenv("PATH", str(tmp_path))
    for name in ("CUDA_VISIBLE_DEVICES", "HIP_VISIBLE_DEVICES", "ROCR_VISIBLE_DEVICES", "SLURM_JOB_ID"):
        monkeypatch.delenv(name, raising=False)
    with pytest.raises(LaunchError) as err:
        check_gpus(spec(("srv",), 1, gpus=1))
    assert "amd-smi list --json` failed with exit status 1: AMDSMI_STATUS_INIT_ERROR" in err.value.message
    assert "check the GPU driver" in (err.value.fix or "")
    fake_tool(tmp_path, "rocm-smi", "\n".join(f"GPU[{i}]\t\t: Device ID: 0x74a1" for i in range(2)))
    check_gpus(spec(("srv",), 1, gpus=2))
    with pytest.raises(LaunchError, match="rocm-smi shows 2 visible"):
        check_gpus(spec(("srv",), 1, gpus=4))
    # an index counts in HIP's order, which only amd-smi (`hip_id`) gives: with it failing, the GPU an index names is
    # not known, and the server (recorded and sampled by that order) is refused, never run on a guess
    monkeypatch.setenv("HIP_VISIBLE_DEVICES", "1")
    with pytest.raises(LaunchError, match=r"HIP_VISIBLE_DEVICES=1 names GPU 1 by index, which counts in HIP's order"):
        check_gpus(spec(("srv",), 1, gpus=1))


def test_an_amd_smi_that_hung_in_one_preflight_is_asked_again_by_the_next(monkeypatch: pytest.MonkeyPatch,
                                                                           tmp_path: Path,
                                                                           caplog: pytest.LogCaptureFixture) -> None:
    """A local or docker sweep runs every server group's preflight in one process. An amd-smi that stalled once (while
    another server initialised) was remembered for the whole process: each later group's preflight failed at once,
    "was not asked", where amd-smi is the only tool (ROCm 7). It is remembered for one preflight: that one waits for it
    once (no `list --json` after `list -e --json` hung), and the next group's preflight asks again."""
    import logging
    import shutil

    from llmsweep import visible

    monkeypatch.setattr(visible, "GPU_TOOL_TIMEOUT_S", 1.0)
    for name in ("CUDA_VISIBLE_DEVICES", "HIP_VISIBLE_DEVICES", "ROCR_VISIBLE_DEVICES", "SLURM_JOB_ID"):
        monkeypatch.delenv(name, raising=False)
    hang, asked = tmp_path / "hang", tmp_path / "asked.log"
    tool = tmp_path / "amd-smi"
    tool.write_text(f"#!/bin/sh\necho \"$*\" >> {asked}\n[ -e {hang} ] && exec {shutil.which('sleep')} 60\n"
                    f"printf '%s\\n' '{amd_smi_list('7.x', enumeration=True)}'\n")
    tool.chmod(tool.stat().st_mode | stat.S_IEXEC)
    monkeypatch.setenv("PATH", str(tmp_path))
    hang.touch()
    with caplog.at_level(logging.WARNING, logger="llmsweep.visible"), pytest.raises(LaunchError) as err:
        check_gpus(spec(("srv",), 1, gpus=2))
    assert "amd-smi list -e --json` did not answer within" in err.value.message, err.value.message
    assert asked.read_text().splitlines() == ["list -e --json"]
    hang.unlink()
    check_gpus(spec(("srv",), 1, gpus=2))  # the next group's preflight asks amd-smi again, and it answers
    assert asked.read_text().splitlines() == ["list -e --json", "list -e --json"]
    said = [r.getMessage() for r in caplog.records if "did not answer" in r.getMessage()]
    assert len(said) == 1 and "amd-smi is not asked again in this launch preflight (the next step" in said[0], said


def test_the_preflight_and_the_uuid_lookup_read_the_hosts_tools_alike(monkeypatch: pytest.MonkeyPatch,
                                                                       tmp_path: Path) -> None:
    """`nvidia-smi -L` had a reader in the preflight (its own `^GPU N:` pattern) beside `llmsweep.visible`'s, and
    amd-smi's `list -e`-then-without in both, with their own timeouts and words: the lookup of a UUID entry said
    "amd-smi list -e --json failed: exit 1: …" where the preflight said "`… list --json` failed with exit status 1"
    (only the last asking). One reader and one runner now: both say what each asking answered, in the same words,
    and read the same GPUs, MIG instances and models from nvidia-smi."""
    import sys

    from llmsweep.execute.preflight import HostGpuQueries
    from llmsweep.visible import list_gpus

    monkeypatch.setitem(sys.modules, "pynvml", None)  # (NVML would answer first on a GPU host)
    for name in ("CUDA_VISIBLE_DEVICES", "HIP_VISIBLE_DEVICES", "ROCR_VISIBLE_DEVICES", "SLURM_JOB_ID"):
        monkeypatch.delenv(name, raising=False)
    env = {"PATH": str(tmp_path)}
    fake_amd_smi(tmp_path, "7.x", broken=True)
    with pytest.raises(LaunchError) as err:
        check_gpus(spec(("srv",), 1, gpus=1), env)
    looked_up = list_gpus(env).source
    for asked in ("list -e --json", "list --json"):
        said = f"`{tmp_path / 'amd-smi'} {asked}` failed with exit status 1: AMDSMI_STATUS_INIT_ERROR"
        assert said in err.value.message and said in looked_up, (said, err.value.message, looked_up)
    (tmp_path / "amd-smi").unlink()
    fake_tool(tmp_path, "nvidia-smi", "GPU 0: NVIDIA A100-SXM4-40GB (UUID: GPU-aaaa1111)\n"
                                      "  MIG 3g.20gb     Device  0: (UUID: MIG-cccc3333)\n"
                                      "GPU 1: NVIDIA H100 80GB HBM3 (UUID: GPU-bbbb2222)")
    listing = HostGpuQueries().listing(env)
    assert listing is not None and listing.listed.indices == (0, 1)
    assert listing.models == {"NVIDIA A100-SXM4-40GB", "NVIDIA H100 80GB HBM3"}
    assert listing.listed.uuids is not None
    assert dict(listing.listed.uuids.uuids) == dict(list_gpus(env).uuids) == {
        "gpu-aaaa1111": 0, "mig-cccc3333": 0, "gpu-bbbb2222": 1}


MIXED = "GPU 0: NVIDIA RTX A2000 (UUID: GPU-aaaa1111)\nGPU 1: NVIDIA H100 80GB HBM3 (UUID: GPU-bbbb2222)"
"""A host whose first GPU (by PCI bus, nvidia-smi's order) is a display card: CUDA's default order counts the H100
first."""


def test_a_gpu_server_on_nvidia_counts_its_gpus_in_nvidia_smis_order(monkeypatch: pytest.MonkeyPatch,
                                                                    tmp_path: Path) -> None:
    """Every index llmsweep reads for a server (the preflight's, the GPUs its result names, the power sampler's) is
    nvidia-smi's, and so is the one an engineer writes after reading nvidia-smi; CUDA counts fastest first unless told
    otherwise. The spec the preflight returns runs the server with CUDA_DEVICE_ORDER=PCI_BUS_ID, so on the host above
    `CUDA_VISIBLE_DEVICES=1` (or a tp=1 server with no selection) is the GPU checked, named and sampled, not the
    other one. An order the recipe or the shell sets is kept; no GPU server, the simulator and AMD get none."""
    from llmsweep.execute.preflight import preflight

    fake_tool(tmp_path, "nvidia-smi", MIXED)
    monkeypatch.setenv("PATH", str(tmp_path))
    for name in ("CUDA_VISIBLE_DEVICES", "HIP_VISIBLE_DEVICES", "ROCR_VISIBLE_DEVICES", "CUDA_DEVICE_ORDER",
                 "SLURM_JOB_ID"):
        monkeypatch.delenv(name, raising=False)
    launched = preflight(spec(("srv", "--port", "0"), 0, gpus=1, env={"CUDA_VISIBLE_DEVICES": "1"}))
    assert launched.env == {"CUDA_VISIBLE_DEVICES": "1", "CUDA_DEVICE_ORDER": "PCI_BUS_ID"}
    assert preflight(spec(("srv", "--port", "0"), 0, gpus=1)).env == {"CUDA_DEVICE_ORDER": "PCI_BUS_ID"}
    assert preflight(spec(("srv", "--port", "0"), 0, gpus=1, env={"CUDA_DEVICE_ORDER": "PCI_BUS_ID"})).env == {
        "CUDA_DEVICE_ORDER": "PCI_BUS_ID"}
    monkeypatch.setenv("CUDA_DEVICE_ORDER", "PCI_BUS_ID")  # the shell's is the server's: nothing to add
    assert preflight(spec(("srv", "--port", "0"), 0, gpus=1)).env == {}
    monkeypatch.delenv("CUDA_DEVICE_ORDER")
    assert preflight(spec(("srv", "--port", "0"), 0, gpus=0)).env == {}  # a CPU server
    assert preflight(spec(("srv", "--port", "0"), 0, gpus=1).model_copy(update={"engine": "sim"}),
                     gpus=False).env == {}
    (tmp_path / "nvidia-smi").unlink()
    fake_amd_smi(tmp_path, "6.4")
    assert preflight(spec(("srv", "--port", "0"), 0, gpus=1)).env == {}


def test_another_gpu_order_set_on_a_host_of_mixed_gpus_is_refused(monkeypatch: pytest.MonkeyPatch,
                                                                   tmp_path: Path) -> None:
    """CUDA_DEVICE_ORDER set to other than PCI_BUS_ID (FASTEST_FIRST, CUDA's default) on a host whose GPUs differ
    numbers them unlike nvidia-smi: the server would run on other GPUs than llmsweep checks, records and samples.
    Refused with where it is set and how to fix it; on a host of one model the orders agree, and it runs."""
    fake_tool(tmp_path, "nvidia-smi", MIXED)
    monkeypatch.setenv("PATH", str(tmp_path))
    for name in ("CUDA_VISIBLE_DEVICES", "HIP_VISIBLE_DEVICES", "ROCR_VISIBLE_DEVICES", "SLURM_JOB_ID"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("CUDA_DEVICE_ORDER", "FASTEST_FIRST")
    with pytest.raises(LaunchError) as shell:
        check_gpus(spec(("srv",), 1, gpus=1))
    assert "CUDA_DEVICE_ORDER=FASTEST_FIRST (set in this shell), not in nvidia-smi's order" in shell.value.message
    assert "(NVIDIA H100 80GB HBM3, NVIDIA RTX A2000)" in shell.value.message
    assert shell.value.fix == ("unset CUDA_DEVICE_ORDER in this shell (llmsweep then runs the server with "
                               "CUDA_DEVICE_ORDER=PCI_BUS_ID, nvidia-smi's order), or set it to PCI_BUS_ID")
    monkeypatch.delenv("CUDA_DEVICE_ORDER")
    with pytest.raises(LaunchError) as recipe:
        check_gpus(spec(("srv",), 1, gpus=1, env={"CUDA_DEVICE_ORDER": "FASTEST_FIRST"}))
    assert "unset CUDA_DEVICE_ORDER in the recipe's `serve.env`" in (recipe.value.fix or "")
    check_gpus(spec(("srv",), 1, gpus=1, env={"CUDA_DEVICE_ORDER": "PCI_BUS_ID"}))
    fake_tool(tmp_path, "nvidia-smi", "GPU 0: NVIDIA H200 (UUID: GPU-a)\nGPU 1: NVIDIA H200 (UUID: GPU-b)")
    check_gpus(spec(("srv",), 1, gpus=1, env={"CUDA_DEVICE_ORDER": "FASTEST_FIRST"}))


def test_the_node_a_preflight_says_to_leave_out_is_the_one_the_option_reads_back() -> None:
    """A node named like a YAML number (`01`): the fix's `exclude=[01]` read back as the number 1, another node."""
    import shlex

    from llmsweep.cli.options import executor_options
    from llmsweep.execute.preflight import _leave_node_out

    said = _leave_node_out({"SLURMD_NODENAME": "01"})
    option = shlex.split(said.split("--executor-option ", 1)[1].split(") and", 1)[0])
    assert executor_options(tuple(option))["exclude"] == ["01"], said


def test_gpu_refusals_say_one_gpu_and_several_gpus(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    """A refusal counts the GPUs as a person says them: `needs 1 GPU`, `needs 2 GPUs`, `would use GPU 1`,
    `would use GPUs 0, 1`, `pid 4242`, `pids 4242 4343` — never `GPU(s)` (`llmsweep.words`)."""
    for name in ("CUDA_VISIBLE_DEVICES", "HIP_VISIBLE_DEVICES", "ROCR_VISIBLE_DEVICES", "SLURM_JOB_ID"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("PATH", str(tmp_path))
    for gpus, said in ((1, "needs 1 GPU but"), (2, "needs 2 GPUs but")):
        with pytest.raises(LaunchError) as no_tool:
            check_gpus(spec(("srv",), 1, gpus=gpus))
        assert said in no_tool.value.message and "(s)" not in no_tool.value.message
    fake_tool(tmp_path, "nvidia-smi", "GPU 0: NVIDIA H200 (UUID: GPU-a)")
    with pytest.raises(LaunchError) as short:
        check_gpus(spec(("srv",), 1, gpus=2, env={"CUDA_VISIBLE_DEVICES": "0"}))
    assert "needs 2 GPUs but nvidia-smi shows 1 visible" in short.value.message
    assert (short.value.fix or "").startswith("name 2 GPUs in the recipe's `serve.env`")
    (tmp_path / "nvidia-smi").unlink()
    busy_nvidia_smi(tmp_path, "GPU-bbbb2222, 4242, 71234, python3\n")
    with pytest.raises(LaunchError) as one:
        check_gpus(spec(("srv",), 1, gpus=1, env={"CUDA_VISIBLE_DEVICES": "1"}))
    assert "would use GPU 1, but" in one.value.message
    assert (one.value.fix or "").startswith("stop or wait for pid 4242 (")
    busy_nvidia_smi(tmp_path, "GPU-aaaa1111, 4242, 71234, python3\nGPU-bbbb2222, 4343, 71234, python3\n")
    with pytest.raises(LaunchError) as two:
        check_gpus(spec(("srv",), 1, gpus=2))
    assert "would use GPUs 0, 1, but" in two.value.message
    assert (two.value.fix or "").startswith("stop or wait for pids 4242 4343 (")


def test_a_gpu_query_that_hangs_in_the_preflight_is_waited_for_once_and_said(monkeypatch: pytest.MonkeyPatch,
                                                                            tmp_path: Path,
                                                                            caplog: pytest.LogCaptureFixture) -> None:
    """The preflight's own `nvidia-smi -L`, `--query-compute-apps` and `rocm-smi --showid` ran outside the GPU tools'
    hang rule (`visible.run_gpu_tool`): a hung query waited its own 30 s, silently (an info line), and was not
    remembered by the step. Now a hung process query is waited for once (the timeout of every GPU tool), warned of,
    and the listing that answered stands: the check passes, best effort, without the tenants."""
    import logging
    import shutil
    import time

    from llmsweep import visible

    monkeypatch.setattr(visible, "GPU_TOOL_TIMEOUT_S", 1.0)
    for name in ("CUDA_VISIBLE_DEVICES", "HIP_VISIBLE_DEVICES", "ROCR_VISIBLE_DEVICES", "SLURM_JOB_ID"):
        monkeypatch.delenv(name, raising=False)
    path = tmp_path / "nvidia-smi"
    path.write_text("#!/bin/sh\ncase \"$1\" in\n"
                    "  -L) printf 'GPU 0: NVIDIA H200 (UUID: GPU-a)\\nGPU 1: NVIDIA H200 (UUID: GPU-b)\\n';;\n"
                    f"  --query-compute-apps=*) exec {shutil.which('sleep')} 60;;\n"
                    "esac\n")
    path.chmod(path.stat().st_mode | stat.S_IEXEC)
    monkeypatch.setenv("PATH", str(tmp_path))
    began = time.monotonic()
    with caplog.at_level(logging.WARNING, logger="llmsweep.visible"):
        check_gpus(spec(("srv",), 1, gpus=2))
    assert time.monotonic() - began < 10
    said = [r.getMessage() for r in caplog.records if "did not answer" in r.getMessage()]
    assert len(said) == 1 and "--query-compute-apps" in said[0]
    assert "not asked again in this launch preflight" in said[0]
