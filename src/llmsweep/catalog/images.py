"""Container image references: registry, repository, tag, digest, and what the tag says about the engine inside.

A recipe pins an engine only through its image tag, and version gates need the version: ``lmsysorg/sglang-rocm:
v0.5.16-rocm720-mi30x-20260730`` is SGLang 0.5.16 on ROCm 7.2.0 for the MI30x family built 2026-07-30. Nightly and
dev tags carry no version; they parse fine with ``version=None`` and a warning, never an error, so the policy layer
decides how much to trust them. Pyxis' ``registry#path`` spelling (Slurm enroot) is understood and preserved.
"""

from __future__ import annotations

import datetime as dt
import re
from pathlib import Path
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field

from llmsweep.catalog.sources import build_models, cached, catalog_dirs
from llmsweep.catalog.version import Version
from llmsweep.engine_ids import ENGINE_IDS, VERSION_TOKEN, engine_of_image
from llmsweep.errors import ConfigError

DEFAULT_REGISTRY = "docker.io"
Channel = Literal["release", "nightly", "dev"]

_REF = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._/#:@+-]*$")
_DIGEST = re.compile(r"^[a-z0-9]+(?:[+._-][a-z0-9]+)*:[0-9a-fA-F]{32,}$")
# the words of a tag that say where a build runs, not which build it is: CUDA, ROCm, Python, OS, GPU family or
# architecture, CPU architecture (`dev-cu13` is the dev branch on CUDA 13, as movable as `dev`)
_PLATFORM_WORDS = re.compile(
    r"(?<![a-z])(?:cu\d+|cuda[\d.]+|rocm[\d.]+|py(?:thon)?[\d.]+|ubuntu[\d.]+|mi\d{2,3}x?|gfx\d+|sm_?\d+|"
    r"amd64|arm64|aarch64|x86_64)(?![a-z\d])")


class ImageRef(BaseModel):
    """A parsed image reference plus what its tag says about the engine, platform and Python."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    raw: str = Field(description="The reference exactly as written.")
    registry: str = Field(description="Registry host; docker.io when the reference names none.")
    repository: str = Field(description="Path inside the registry, e.g. 'lmsysorg/sglang-rocm'.")
    tag: str | None = None
    digest: str | None = None
    pyxis: bool = Field(default=False, description="Written in pyxis/enroot 'registry#path' form.")
    engine: str | None = Field(default=None, description="sglang, vllm, trtllm, atom, sim; None if not recognised.")
    version: Version | None = Field(default=None, description="Engine version from the tag; None if unknown.")
    channel: Channel = "release"
    platform: Literal["cuda", "rocm"] | None = None
    rocm_version: str | None = None
    cuda_version: str | None = None
    gpu_family: str | None = Field(default=None, description="GPU family of a ROCm build: mi30x, mi35x…")
    build_date: dt.date | None = None
    commit: str | None = Field(default=None, description="Source commit of a nightly tag.")
    python_version: str | None = None
    python_path: str | None = None
    python_evidence: str | None = None
    python_estimate: bool = False
    warnings: list[str] = Field(default_factory=list)

    @property
    def name(self) -> str:
        return f"{self.registry}/{self.repository}"

    @property
    def moving(self) -> bool:
        """The reference can name another build tomorrow: no tag, or a tag that names no build of its own, neither a
        version, a build date, a commit nor any other number once the words for the platform it runs on are set aside
        (`_PLATFORM_WORDS`: `:latest`, `:nightly`, `:dev-cu13`, `:blackwell`, `:rocm` are moving; `:v0.5.16-rocm720`,
        `:nightly-20260105`, `:nightly-<commit>`, `:build42` and `@sha256:…` name one build). A branch word alone
        (`nightly`, `dev`) does not decide it: InferenceX pins nightlies by date or commit."""
        if self.digest is not None or self.version is not None or self.build_date is not None or self.commit:
            return False
        return not self.tag or not any(c.isdigit() for c in _PLATFORM_WORDS.sub("", self.tag.lower()))

    def reference(self, pyxis: bool | None = None) -> str:
        """Normalised reference; pyxis form (``registry#path``) when asked or when the input used it."""
        sep = "#" if (self.pyxis if pyxis is None else pyxis) else "/"
        text = f"{self.registry}{sep}{self.repository}"
        if self.tag:
            text += f":{self.tag}"
        if self.digest:
            text += f"@{self.digest}"
        return text

    def python_at_least(self, minimum: str) -> bool | None:
        """Whether the image's Python is >= ``minimum`` (e.g. '3.11'); None when the Python is unknown."""
        if self.python_version is None:
            return None
        have = Version.try_parse(self.python_version)
        want = Version.try_parse(minimum)
        if have is None or want is None:
            return None
        return have.release[: len(want.release)] >= want.release


def image_fits_hardware(image: ImageRef, sku: str) -> tuple[bool | None, str]:
    """Whether an image was built for a SKU: platform (cuda/rocm) and, for ROCm builds, the GPU family (an -mi35x-
    image targets gfx950 and does not run on an MI300X). (None, why) when the tag does not say."""
    from llmsweep.catalog.hardware import get_hardware

    hw = get_hardware(sku)
    if image.platform is None:
        return None, f"image {image.raw!r} does not say which platform it targets"
    if image.platform != hw.platform:
        return False, f"image {image.raw!r} is a {image.platform} build; {hw.id} needs a {hw.platform} build"
    if image.gpu_family and hw.image_gpu_family and image.gpu_family != hw.image_gpu_family:
        return False, (
            f"image {image.raw!r} is built for {image.gpu_family}; {hw.id} ({hw.arch}) needs a "
            f"{hw.image_gpu_family} build"
        )
    if image.platform == "rocm" and image.gpu_family is None:
        return None, f"image {image.raw!r} does not name its GPU family; cannot tell whether it targets {hw.arch}"
    return True, f"image {image.raw!r} targets {hw.id} ({hw.platform}{', ' + hw.arch if image.gpu_family else ''})"


class PythonRule(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)

    repository: str
    tag_pattern: str
    python: str
    path: str | None = None
    priority: int = 0
    estimate: bool = False
    evidence: str


@cached
def _python_rules(dirs: tuple[Path, ...]) -> list[PythonRule]:
    rules = [r for r, _ in build_models("images.yaml", "python", PythonRule, dirs).values()]
    return sorted(rules, key=lambda r: -r.priority)  # stable: file order breaks ties


def python_rules() -> list[PythonRule]:
    """The image -> Python table, highest priority first (packaged plus user rules)."""
    return list(_python_rules(catalog_dirs()))


# ------------------------------------------------------------------------------------------------- reference parsing


def _split_reference(ref: str) -> tuple[str, str, str | None, str | None, bool]:
    text = ref.strip()
    if not text or not _REF.match(text):
        raise ConfigError(
            f"image reference {ref!r} is not a valid image name",
            fix="write it like registry/repository:tag (e.g. lmsysorg/sglang:v0.5.16-rocm720-mi30x)",
        )
    digest = None
    if "@" in text:
        text, digest = text.split("@", 1)
        if not _DIGEST.match(digest):
            raise ConfigError(f"image reference {ref!r} has a malformed digest {digest!r}",
                              fix="a digest looks like sha256:<64 hex digits>")
    pyxis = "#" in text
    if pyxis:
        registry, path = text.split("#", 1)
    else:
        first, _, rest = text.partition("/")
        if rest and ("." in first or ":" in first or first == "localhost"):
            registry, path = first, rest
        else:
            registry, path = DEFAULT_REGISTRY, text
    tag = None
    last = path.rsplit("/", 1)[-1]
    if ":" in last:
        path, tag = path.rsplit(":", 1)
        if not tag:
            raise ConfigError(f"image reference {ref!r} ends with ':' but has no tag", fix="add the tag or drop ':'")
    if not path or "#" in path or ":" in path:
        raise ConfigError(f"image reference {ref!r} has an invalid repository path", fix="check the ':' and '#'")
    if registry == DEFAULT_REGISTRY and "/" not in path:
        path = f"library/{path}"
    return registry.lower(), path.lower(), tag, digest, pyxis


def _date(text: str) -> dt.date | None:
    try:
        return dt.date(int(text[:4]), int(text[4:6]), int(text[6:8]))
    except ValueError:
        return None


def _rocm(tag: str) -> str | None:
    if m := re.search(r"rocm(\d+\.\d+(?:\.\d+)?)", tag):
        return m.group(1) if m.group(1).count(".") == 2 else m.group(1) + ".0"
    if m := re.search(r"rocm(\d)(\d)(\d)(?!\d)", tag):
        return ".".join(m.groups())
    return None


def _cuda(tag: str) -> str | None:
    if m := re.search(r"(?:^|[-_])cu(\d{2})(\d)(?!\d)", tag):
        return f"{m.group(1)}.{m.group(2)}"
    if m := re.search(r"cuda(\d+\.\d+)", tag):
        return m.group(1)
    return None


def _version_from(engine: str | None, tag: str, repository: str) -> str | None:
    """The engine's version token in a tag, per the engine's tagging convention; None when the tag has none."""
    if engine is None or "dynamo" in repository:
        return None  # dynamo runtime tags carry Dynamo's version, not the engine's
    ident = ENGINE_IDS[engine]
    for pattern in ident.image_version_patterns:
        if m := re.search(pattern, tag):
            return m.group(1)
    # else a tag that leads with a version carries the engine's (`v0.5.16-rocm720`, `v0.1.3-rocm7.2.4`)
    m = re.match(rf"^v?({VERSION_TOKEN})(?=$|[-_])", tag)
    return m.group(1) if m else None


def _branch_channel(tag: str) -> Channel | None:
    """The channel a tag's own words name (`nightly`, `latest`, `main`: nightly; a `dev` word: dev), None when they
    name none: the one reading of branch words, for `_channel`."""
    t = tag.lower()
    if "nightly" in t or t in {"latest", "main"}:
        return "nightly"
    if re.search(r"(?:^|[-_.])dev(?:$|[-_.\d])", t):
        return "dev"
    return None


def _channel(tag: str, repository: str, engine: str | None, version: str | None) -> Channel:
    if (named := _branch_channel(tag)) is not None:
        return named
    if re.search(r"[-/]dev$|sgl-dev", repository):
        return "dev"
    if engine is not None and version is None:
        return "dev"
    return "release"


def _python_for(repository: str, tag: str) -> tuple[str | None, str | None, str | None, bool]:
    """(python, path, evidence, estimate): data table first, then a ``py3.12`` tag token, then estimated rules."""
    rules = _python_rules(catalog_dirs())
    for rule in rules:
        if not rule.estimate and rule.repository.lower() == repository and re.search(rule.tag_pattern, tag):
            return rule.python, rule.path, rule.evidence, False
    if m := re.search(r"(?:^|[-_])py(\d\.\d+(?:\.\d+)?)(?=$|[-_])", tag):
        return m.group(1), None, "stated in the image tag", False
    for rule in rules:
        if rule.estimate and rule.repository.lower() == repository and re.search(rule.tag_pattern, tag):
            return rule.python, rule.path, rule.evidence, True
    return None, None, None, False


def parse_image(ref: str) -> ImageRef:
    """Parse an image reference and read engine, version, platform, GPU family, build date and Python from it."""
    registry, repository, tag, digest, pyxis = _split_reference(ref)
    engine = engine_of_image(repository)
    t = (tag or "").lower()
    version_text = _version_from(engine, t, repository) if tag else None
    version = Version.try_parse(version_text) if version_text else None
    rocm = _rocm(t)
    cuda = _cuda(t)
    if rocm or "rocm" in repository:
        platform: Literal["cuda", "rocm"] | None = "rocm"
    elif cuda:
        platform = "cuda"
    else:
        platform = ENGINE_IDS[engine].image_platform if engine is not None else None
    gpu = re.search(r"(?:^|[-_])(mi\d{2,3}x?)(?=$|[-_])", t)
    date = None
    if m := re.search(r"(?<!\d)(20\d{6})(?:\d{4})?(?!\d)", t):
        date = _date(m.group(1))
    commit = None
    m = re.search(r"(?:^|[-_])([0-9a-f]{40}|[0-9a-f]{7,12})(?=$|[-_])", t)
    if m and re.search(r"[a-f]", m.group(1)):
        commit = m.group(1)
    channel = _channel(t, repository, engine, version_text) if tag else "dev"
    warnings: list[str] = []
    if engine is None:
        warnings.append(f"image {ref!r}: engine not recognised from the repository name")
    elif version is None:
        if not tag:
            why = "no tag"
        elif "dynamo" in repository:
            why = f"Dynamo runtime tag {tag!r} carries Dynamo's version, not {engine}'s"
        else:
            why = f"{channel} tag {tag!r} names no engine version"
        warnings.append(f"image {ref!r}: {engine} version unknown ({why}); version gates cannot be checked")
    py, py_path, py_evidence, py_estimate = _python_for(repository, t) if tag else (None, None, None, False)
    return ImageRef(
        raw=ref,
        registry=registry,
        repository=repository,
        tag=tag,
        digest=digest,
        pyxis=pyxis,
        engine=engine,
        version=version,
        channel=channel,
        platform=platform,
        rocm_version=rocm,
        cuda_version=cuda,
        gpu_family=gpu.group(1) if gpu else None,
        build_date=date,
        commit=commit,
        python_version=py,
        python_path=py_path,
        python_evidence=py_evidence,
        python_estimate=py_estimate,
        warnings=warnings,
    )
