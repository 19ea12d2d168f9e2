"""Entry-point loading, duplicate names, blocking and plugin errors, with fake distributions
in the style of pluggy's and pytest's own tests."""

from __future__ import annotations

import types

import capmetrics
import pytest
from capmetrics import Distance, PluginError, Scores, hookimpl
from capmetrics.registry import get_registry
from capmetrics.registry.manager import collect_components, make_plugin_manager


class FakeEntryPoint:
    group = "capmetrics"

    def __init__(self, name: str, module: object) -> None:
        self.name = name
        self.value = f"fake_{name}"
        self._module = module

    def load(self) -> object:
        if isinstance(self._module, Exception):
            raise self._module
        return self._module


class FakeDistribution:
    def __init__(self, name: str, version: str, *eps: FakeEntryPoint) -> None:
        self.metadata = {"Name": name}
        self.version = version
        self.entry_points = eps
        for ep in eps:
            ep.dist = self


class Overlap(Distance):
    """Share of candidate words found in the references."""

    name = "overlap"

    def score(self, candidates, references):
        import numpy as np

        vals = np.array(
            [
                len(set(c.split()) & {w for r in rs for w in r.split()}) / max(len(c.split()), 1)
                for c, rs in zip(candidates, references)
            ]
        )
        return Scores(vals, float(vals.mean()))


def plugin_module(name: str, cls: type, hook: str = "register_distances") -> types.ModuleType:
    module = types.ModuleType(name)

    def register(register):
        register(cls)

    register.__name__ = hook
    setattr(module, hook, hookimpl(register))
    return module


@pytest.fixture
def fake_dists(monkeypatch):
    from capmetrics.registry import manager

    real = manager._entry_points()

    def install(*dists: FakeDistribution) -> None:
        fakes = [ep for dist in dists for ep in dist.entry_points]
        monkeypatch.setattr(manager, "_entry_points", lambda: [*real, *fakes])

    return install


def build():
    return collect_components(*make_plugin_manager())


def test_bundled_plugins_load_through_entry_points():
    reg = get_registry()
    entry = reg.lookup("mean", ["aggregator"])
    assert entry.plugin.distribution == "capmetrics"
    assert entry.plugin.module == "capmetrics.plugins.aggregators"
    assert {"aggregators", "multicandidate", "tokenizers"} <= {p.name for p in reg.plugins}


def test_third_party_plugin_is_listed_with_its_package(fake_dists):
    fake_dists(
        FakeDistribution(
            "capmetrics-overlap", "1.2", FakeEntryPoint("overlap", plugin_module("m", Overlap))
        )
    )
    reg = build()
    entry = reg.lookup("overlap", ["distance"])
    assert (entry.plugin.distribution, entry.plugin.version) == ("capmetrics-overlap", "1.2")
    stat = capmetrics.registry.compose(
        "over-candidates(distance=overlap, reduce=max)", registry=reg
    )
    assert stat.compare(["a b", "a z"], ["a b c"]).value == 1.0


def test_duplicate_component_names_name_both_packages(fake_dists):
    fake_dists(
        FakeDistribution("pkg-one", "0.1", FakeEntryPoint("one", plugin_module("m1", Overlap))),
        FakeDistribution("pkg-two", "0.2", FakeEntryPoint("two", plugin_module("m2", Overlap))),
    )
    with pytest.raises(PluginError) as info:
        build()
    msg = str(info.value)
    assert "distance name 'overlap' is registered twice:" in msg
    assert "plugin 'one' from pkg-one 0.1" in msg and "plugin 'two' from pkg-two 0.2" in msg
    assert "CAPMETRICS_DISABLE_PLUGINS=two" in msg


def test_blocking_by_environment(fake_dists, monkeypatch):
    fake_dists(
        FakeDistribution("pkg-one", "0.1", FakeEntryPoint("one", plugin_module("m1", Overlap))),
        FakeDistribution("pkg-two", "0.2", FakeEntryPoint("two", plugin_module("m2", Overlap))),
    )
    monkeypatch.setenv("CAPMETRICS_DISABLE_PLUGINS", "two, multicandidate")
    reg = build()
    assert reg.lookup("overlap").plugin.distribution == "pkg-one"
    assert "over-candidates" not in reg.names("statistic")


def test_autoload_switch_keeps_only_bundled_plugins(fake_dists, monkeypatch):
    fake_dists(
        FakeDistribution("pkg-one", "0.1", FakeEntryPoint("one", plugin_module("m1", Overlap)))
    )
    monkeypatch.setenv("CAPMETRICS_DISABLE_PLUGIN_AUTOLOAD", "1")
    reg = build()
    assert "overlap" not in reg.names("distance")
    assert "mean" in reg.names("aggregator")


def test_import_error_names_plugin_entry_point_and_package(fake_dists):
    fake_dists(
        FakeDistribution(
            "pkg-broken",
            "3.0",
            FakeEntryPoint("broken", ModuleNotFoundError("No module named 'torch'")),
        )
    )
    with pytest.raises(PluginError) as info:
        build()
    assert str(info.value) == (
        "could not import plugin 'broken' (entry point fake_broken) from pkg-broken 3.0:\n"
        "ModuleNotFoundError: No module named 'torch'"
    )


def test_registering_a_non_component_is_an_error(fake_dists):
    fake_dists(FakeDistribution("pkg-bad", "0.1", FakeEntryPoint("bad", plugin_module("m", dict))))
    with pytest.raises(
        PluginError, match="registered <class 'dict'> as a distance, but it is not a subclass"
    ):
        build()


def test_unknown_hook_is_rejected(fake_dists):
    module = types.ModuleType("typo")
    module.register_distance = hookimpl(lambda register: None)  # missing "s"
    fake_dists(FakeDistribution("pkg-typo", "0.1", FakeEntryPoint("typo", module)))
    with pytest.raises(PluginError, match="unknown hook 'register_distance'"):
        build()


def test_varargs_constructors_are_refused(fake_dists):
    class Loose(Overlap):
        name = "loose"

        def __init__(self, *args):
            pass

    fake_dists(
        FakeDistribution("pkg-loose", "0.1", FakeEntryPoint("loose", plugin_module("m", Loose)))
    )
    with pytest.raises(capmetrics.CapmetricsError, match="no \\*args/\\*\\*kwargs"):
        build()


def test_plugin_registered_in_code(add_plugin):
    class InCode:
        @hookimpl
        def register_distances(self, register):
            register(Overlap)

    add_plugin(InCode(), "in-code")
    assert capmetrics.compose("overlap").score(["a b"], [["a"]]).values.tolist() == [0.5]
    assert get_registry().lookup("overlap").plugin.distribution == "(registered in code)"
