"""The pages in a real Chromium: what is drawn is checked from the pixels, not only from the DOM.

Each view is screenshotted and its pixels are counted by colour: tracker
hits are gold, related objects magenta, jets orange. Toggling a layer or
clicking a jet must change those counts the way a physicist would see it.
The full page of the main test is saved as a PNG (the test's temporary
directory, and ``$GIOD_TEST_ARTIFACTS`` when set).

The display's tests run on both of its paths: the page's own WebGL views
(``webgl3d.js``: the 3-D view and both projections), and the plotly.js fallback
of an install where that file is absent (the browser gets a 404 for it).
"""

from __future__ import annotations

import io
import os
import shutil
from pathlib import Path

import numpy as np
import pytest

from giod.server.app import ServerThread, create_app

pytestmark = pytest.mark.slow

BACKGROUND = (17, 19, 24)
HITS = (255, 215, 0)
JETS = (255, 165, 0)


def pixels(page, selector: str) -> np.ndarray:
    from PIL import Image

    png = page.locator(selector).screenshot()
    return np.asarray(Image.open(io.BytesIO(png)).convert("RGB")).astype(np.int16)


def near(img: np.ndarray, rgb: tuple[int, int, int], tol: int = 30) -> int:
    """Pixels within ``tol`` of a colour in every channel."""
    return int((np.abs(img - np.array(rgb)).max(axis=2) <= tol).sum())


def magenta_ish(img: np.ndarray) -> int:
    """Pixels of the highlight colour, also where it shows through a translucent jet cone."""
    r, g, b = img[..., 0], img[..., 1], img[..., 2]
    return int(((r > 170) & (b > 100) & (g < 120) & (b - g > 60)).sum())


def changed(a: np.ndarray, b: np.ndarray, tol: int = 30) -> int:
    return int((np.abs(a - b).max(axis=2) > tol).sum())


#: What the browser logs for the 404 of the absent webgl3d.js on the fallback path, and nothing else.
MISSING_FILE = "Failed to load resource: the server responded with a status of 404"


@pytest.fixture(params=["webgl", "plotly"])
def display_page(request, page):
    """The page on the fast WebGL path, or on the plotly.js fallback (webgl3d.js absent)."""
    page.renderer = request.param
    if request.param == "plotly":
        page.page.route("**/static/webgl3d.js", lambda route: route.fulfill(status=404, body="not found"))
    return page


def errors_of(p) -> list[str]:
    """Console errors, but for the one expected on the fallback path (its missing file)."""
    return [e for e in p.errors if not (p.renderer == "plotly" and MISSING_FILE in e)]


#: Per view: whether plotly.js drew it (its graph div holds traces) and whether it holds a WebGL canvas of its own.
VIEW_KINDS = """() => Object.fromEntries(["view3d", "viewRphi", "viewRz"].map((id) => {
    const gd = document.getElementById(id), canvas = gd.querySelector(":scope > canvas");
    return [id, {plotly: Array.isArray(gd.data), webgl: !!canvas && !!canvas.getContext("webgl")}];
}))"""


def check_renderer(p) -> None:
    """Every view is drawn by the path asked for (plotly.js is not even loaded on the fast one); the
    fallback says so, once."""
    state = p.state()
    assert state["renderer"] == p.renderer
    note = p.page.locator("#renderer-note")
    kinds = p.page.evaluate(VIEW_KINDS)
    if p.renderer == "plotly":
        assert note.is_visible() and "plotly.js" in note.inner_text()
        assert note.inner_text().count("plotly.js") == 1
        assert p.page.get_by_text("Views drawn with plotly.js").count() == 1
        assert all(k["plotly"] for k in kinds.values()), kinds
    else:
        assert note.is_hidden()
        assert all(k["webgl"] and not k["plotly"] for k in kinds.values()), kinds
        assert p.page.evaluate("() => window.Plotly === undefined")


def settle(p) -> None:
    p.page.evaluate("() => window.giodDisplay.settled()")


def open_display(p, url: str, query: str) -> dict:
    p.page.goto(f"{url}/display?{query}")
    return p.ready()


def save_artefact(page, tmp_path: Path, name: str) -> Path:
    path = tmp_path / name
    page.screenshot(path=str(path), full_page=True)
    extra = os.environ.get("GIOD_TEST_ARTIFACTS")
    if extra:
        Path(extra).mkdir(parents=True, exist_ok=True)
        shutil.copy(path, Path(extra) / name)
    return path


def toggle(p, layer: str) -> None:
    p.page.locator(f'#layers input[data-layer="{layer}"]').click()
    settle(p)


def test_display_draws_the_detector_and_the_event(display_page, open_server, sim, tmp_path):
    page = display_page
    state = open_display(page, open_server.url, "dataset=sim&entry=2")
    check_renderer(page)
    assert state["ready"] and state["error"] is None
    event = sim["sim"].event(2)
    assert state["counts"]["hits"] == len(event.tracker_hits)
    assert state["counts"]["tracks"] == len(event.tracks)
    assert state["counts"]["ecal"] + state["counts"]["hcal"] == len(event.calo_cells)
    assert state["counts"]["jets"] == len(event.jets)
    shot = save_artefact(page.page, tmp_path, f"display-sim-2-{page.renderer}.png")
    assert shot.stat().st_size > 20_000

    views = {v: pixels(page.page, f"#{v}") for v in ("view3d", "viewRphi", "viewRz")}
    for name, img in views.items():
        drawn = (np.abs(img - np.array(BACKGROUND)).max(axis=2) > 12).mean()
        assert drawn > 0.03, f"{name}: only {drawn:.1%} of the view differs from the background"
        assert near(img, HITS) > 40, f"{name}: no tracker hits to be seen"

    # hits off: their colour goes; back on: it comes back
    toggle(page, "hits")
    assert page.state()["layers"]["hits"] is False
    off = {v: pixels(page.page, f"#{v}") for v in views}
    for v in views:
        assert near(off[v], HITS) < 0.2 * near(views[v], HITS), v
    toggle(page, "hits")
    back = pixels(page.page, "#viewRphi")
    assert near(back, HITS) > 0.8 * near(views["viewRphi"], HITS)

    # the detector is drawn: without it many pixels change in every view
    toggle(page, "detector")
    for v in views:
        assert changed(views[v], pixels(page.page, f"#{v}")) > 2000, v
    toggle(page, "detector")

    # calorimeter cells: the ECAL towers are visible in 3-D and in both projections
    toggle(page, "ecal")
    for v in views:
        assert changed(views[v], pixels(page.page, f"#{v}")) > 100, v
    toggle(page, "ecal")
    # the next event in the open page: still one note on the fallback, and every view changes
    page.page.evaluate("() => window.giodDisplay.load('sim', 3)")
    check_renderer(page)
    for v in views:
        assert changed(views[v], pixels(page.page, f"#{v}")) > 500, v
    assert errors_of(page) == [], page.errors


def test_the_event_is_requested_from_the_head_once_and_drawn_in_3d_first(page, open_server):
    requests: list[str] = []
    page.page.on("request", lambda r: requests.append(r.url))
    state = open_display(page, open_server.url, "dataset=sim&entry=3")
    assert state["ready"]
    scene = [i for i, u in enumerate(requests) if u.endswith("/api/v1/events/sim/3")]
    assert len(scene) == 1, requests  # the page's head asked, and display.js took the answer over
    # asked before display.js had even imported its first module
    common = next(i for i, u in enumerate(requests) if u.endswith("/static/common.js"))
    assert scene[0] < common
    t = state["timings"]
    # the WebGL views draw the 3-D view, then the projections; plotly.js is never asked for
    assert state["renderer"] == t["renderer"] == "webgl"
    assert t["first_draw_at_ms"] <= t["since_navigation_ms"]
    assert t.get("plotly_ready_ms") is None
    assert any(u.endswith("/static/webgl3d.js") for u in requests)
    assert not any("plotly" in u for u in requests), requests
    assert page.page.evaluate("() => window.giodDisplay.drawn3d") is True
    # stepping on goes through the API as usual, once
    page.page.evaluate("() => window.giodDisplay.load('sim', 4)")
    assert sum(u.endswith("/api/v1/events/sim/4") for u in requests) == 1
    assert page.state()["entry"] == 4
    assert not page.errors, page.errors


def test_clicking_a_jet_highlights_its_tracks_and_clusters(display_page, open_server, sim):
    page = display_page
    ds = sim["sim"]
    entry, jet = next((e, j) for e in range(6) for j, x in enumerate(ds.event(e, ["jets"]).jets)
                      if len(x.tracks_index) >= 3 and abs(x.eta) < 1.5)
    record = ds.event(entry, ["jets"]).jets[jet]
    open_display(page, open_server.url, f"dataset=sim&entry={entry}")
    check_renderer(page)
    before = {v: pixels(page.page, f"#{v}") for v in ("view3d", "viewRphi")}
    assert magenta_ish(before["viewRphi"]) < 30

    tip = page.page.evaluate(f"() => window.giodDisplay.jetTip({jet})")
    page.page.mouse.move(tip["x"], tip["y"])
    if page.renderer == "plotly":  # plotly clicks what the pointer hovers: let the hover land on the jet
        page.page.wait_for_function("() => (document.getElementById('viewRphi')._hoverdata || []).length > 0",
                                    timeout=30_000)
    page.page.mouse.click(tip["x"], tip["y"])
    page.page.wait_for_function("() => window.giodDisplay.selected !== null", timeout=30_000)
    settle(page)
    state = page.state()
    assert state["selected"] == {"role": "jets", "index": jet}
    assert state["highlight"]["tracks"] == sorted(record.tracks_index.to_list())
    assert state["highlight"]["clusters"] == sorted(record.clusters_index.to_list())
    assert len(state["highlight"]["hits"]) > 3 * len(record.tracks_index)  # the tracks bring their hits
    after = {v: pixels(page.page, f"#{v}") for v in before}
    assert magenta_ish(after["viewRphi"]) > magenta_ish(before["viewRphi"]) + 150
    assert magenta_ish(after["view3d"]) > magenta_ish(before["view3d"]) + 150
    oid = page.page.locator("#selected-oid").inner_text()
    assert oid.endswith(f"/jets/{entry}#{jet}")

    # a track from the object list: its hits light up, and only them
    track = record.tracks_index.to_list()[0]
    hits = ds.event(entry, ["tracks"]).tracks[track].hits_index.to_list()
    page.page.locator("#objects summary", has_text="tracks").click()
    page.page.locator(f'#objects tr[data-role="tracks"][data-index="{track}"]').click()
    settle(page)
    state = page.state()
    assert state["selected"] == {"role": "tracks", "index": track}
    assert state["highlight"]["hits"] == sorted(hits)
    assert jet in state["highlight"]["jets"]  # and the jet that holds the track
    assert errors_of(page) == [], page.errors


def test_clicking_a_jet_in_the_webgl_view(page, open_server, sim):
    """The 3-D view's own picking: a click on a jet's axis selects that jet and lights up its tracks."""
    ds = sim["sim"]
    open_display(page, open_server.url, "dataset=sim&entry=1")
    assert page.state()["renderer"] == "webgl"
    n = len(ds.event(1, ["jets"]).jets)
    tips = [page.page.evaluate(f"() => window.giodDisplay.jetTip3d({j})") for j in range(n)]
    jet = next(j for j, t in enumerate(tips) if t["inside"])
    before = pixels(page.page, "#view3d")
    page.page.mouse.click(tips[jet]["x"], tips[jet]["y"])
    page.page.wait_for_function("() => window.giodDisplay.selected !== null", timeout=30_000)
    settle(page)
    state = page.state()
    assert state["selected"] == {"role": "jets", "index": jet}
    record = ds.event(1, ["jets"]).jets[jet]
    assert state["highlight"]["tracks"] == sorted(record.tracks_index.to_list())
    assert magenta_ish(pixels(page.page, "#view3d")) > magenta_ish(before) + 150
    # a drag turns the view: pixels move, nothing is selected anew
    box = page.page.locator("#view3d").bounding_box()
    cx, cy = box["x"] + box["width"] / 2, box["y"] + box["height"] / 2
    turned = pixels(page.page, "#view3d")
    page.page.mouse.move(cx, cy)
    page.page.mouse.down()
    page.page.mouse.move(cx + 120, cy + 40, steps=6)
    page.page.mouse.up()
    settle(page)
    assert changed(turned, pixels(page.page, "#view3d")) > 2000
    assert page.state()["selected"] == {"role": "jets", "index": jet}
    assert not page.errors, page.errors


def test_the_projections_are_drawn_by_the_webgl_views(page, open_server, sim):
    """r-phi and r-z come from webgl3d.js: pixels of the event in each, panning and zooming them,
    a jet clicked in r-z; each view keeps its own camera."""
    ds = sim["sim"]
    open_display(page, open_server.url, "dataset=sim&entry=2")
    page.renderer = "webgl"
    check_renderer(page)
    views = {v: pixels(page.page, f"#{v}") for v in ("viewRphi", "viewRz")}
    for name, img in views.items():
        assert near(img, HITS) > 40, name
        assert near(img, JETS) > 40, name  # jet wedges' edges and tips
        assert near(img, (61, 220, 90), tol=40) > 20, name  # ECAL towers
    # the tick labels are the views' own, as plotly's were
    assert "300" in page.page.locator("#viewRphi").inner_text()
    assert "z (cm)" in page.page.locator("#viewRz").inner_text()

    # the wheel zooms r-phi about the pointer: the hits spread over more pixels; r-z stays as it was
    box = page.page.locator("#viewRphi").bounding_box()
    page.page.mouse.move(box["x"] + box["width"] / 2, box["y"] + box["height"] / 2)
    page.page.mouse.wheel(0, -600)
    settle(page)
    zoomed = pixels(page.page, "#viewRphi")
    assert changed(views["viewRphi"], zoomed) > 2000
    assert changed(views["viewRz"], pixels(page.page, "#viewRz")) == 0
    # a double click goes back to where it was
    # (in a corner, outside the detector: a click on an object would select it and light it up)
    page.page.mouse.dblclick(box["x"] + 6, box["y"] + 6)
    page.page.mouse.move(0, 0)  # off the view: no tooltip either
    settle(page)
    assert changed(views["viewRphi"], pixels(page.page, "#viewRphi")) < 50

    # a jet clicked in r-z selects it and lights up its tracks in r-z
    n = len(ds.event(2, ["jets"]).jets)
    tips = [page.page.evaluate(f"() => window.giodDisplay.jetTip({j}, 'viewRz')") for j in range(n)]
    jet = next(j for j, t in enumerate(tips) if t["inside"])
    # over the tip, the view names the jet (as plotly's hover label did) and shows a hand
    page.page.mouse.move(tips[jet]["x"], tips[jet]["y"])
    page.page.wait_for_function(
        f"() => document.querySelector('#viewRz > canvas').title.startsWith('jets[{jet}]')", timeout=30_000)
    assert page.page.evaluate("() => document.querySelector('#viewRz > canvas').style.cursor") == "pointer"
    page.page.mouse.click(tips[jet]["x"], tips[jet]["y"])
    page.page.wait_for_function("() => window.giodDisplay.selected !== null", timeout=30_000)
    settle(page)
    assert page.state()["selected"] == {"role": "jets", "index": jet}
    assert magenta_ish(pixels(page.page, "#viewRz")) > magenta_ish(views["viewRz"]) + 150
    assert not page.errors, page.errors


def test_projections_fall_back_to_plotly_without_a_stencil_buffer(page, open_server):
    """A WebGL context without a stencil buffer cannot fill the projections' shapes: the 3-D view
    stays WebGL, plotly.js draws r-phi and r-z, and every view shows the event."""
    page.page.add_init_script("""(() => {
        const attributes = WebGLRenderingContext.prototype.getContextAttributes;
        WebGLRenderingContext.prototype.getContextAttributes = function () {
            return { ...attributes.call(this), stencil: false };
        };
    })()""")
    open_display(page, open_server.url, "dataset=sim&entry=2")
    kinds = page.page.evaluate(VIEW_KINDS)
    assert kinds["view3d"] == {"plotly": False, "webgl": True}, kinds
    assert kinds["viewRphi"]["plotly"] and kinds["viewRz"]["plotly"], kinds
    for v in ("view3d", "viewRphi", "viewRz"):
        assert near(pixels(page.page, f"#{v}"), HITS) > 40, v
    assert not page.errors, page.errors


def test_the_next_event_is_fetched_ahead_once(page, open_server):
    """While an event is shown the page fetches the entry ▶ goes to and builds its views' vertex arrays;
    the step draws it without asking again, the same pixels as the event drawn from scratch, and a
    step back draws the event before from what the page kept."""
    requests: list[str] = []
    page.page.on("request", lambda r: requests.append(r.url))
    open_display(page, open_server.url, "dataset=sim&entry=1")
    assert page.page.evaluate("() => window.giodDisplay.prefetching") == 2
    assert sum(u.endswith("/api/v1/events/sim/2") for u in requests) == 1
    first = pixels(page.page, "#viewRphi")
    page.page.locator("#next").click()
    page.page.wait_for_function("(s => s.entry === 2 && s.ready && !s.loading)(window.giodDisplay)", timeout=60_000)
    assert changed(first, pixels(page.page, "#viewRphi")) > 500  # the other event is drawn
    stepped = {v: pixels(page.page, f"#{v}") for v in ("view3d", "viewRphi", "viewRz")}
    assert sum(u.endswith("/api/v1/events/sim/2") for u in requests) == 1
    assert page.page.evaluate("() => window.giodDisplay.prefetching") == 3
    page.page.locator("#prev").click()
    page.page.wait_for_function("(s => s.entry === 1 && s.ready && !s.loading)(window.giodDisplay)", timeout=60_000)
    assert changed(first, pixels(page.page, "#viewRphi")) < 50  # the same pixels as before
    assert sum(u.endswith("/api/v1/events/sim/1") for u in requests) == 1
    # forgotten, an entry is asked for again
    page.page.evaluate("() => { window.giodDisplay.forget(); return window.giodDisplay.load('sim', 2); }")
    assert sum(u.endswith("/api/v1/events/sim/2") for u in requests) == 2
    for v, img in stepped.items():  # built ahead or now, the same event looks the same
        assert changed(img, pixels(page.page, f"#{v}")) < 50, v
    assert not page.errors, page.errors


def test_controls_change_the_event(page, open_server, sim):
    ds = sim["sim"]
    open_display(page, open_server.url, "dataset=sim&entry=0")
    first = pixels(page.page, "#viewRphi")
    page.page.locator("#next").click()
    page.page.wait_for_function("() => window.giodDisplay.entry === 1 && window.giodDisplay.ready", timeout=120_000)
    assert changed(first, pixels(page.page, "#viewRphi")) > 500
    assert "entry=1" in page.page.url

    passing = ds.select("njets >= 2").entries().tolist()
    expected = next(e for e in passing if e > 1)
    page.page.locator("#where").fill("njets >= 2")
    page.page.locator("#where-next").click()
    page.page.wait_for_function(f"() => window.giodDisplay.entry === {expected} && window.giodDisplay.ready",
                                timeout=120_000)
    assert f"of {len(passing)} passing njets >= 2" in page.page.locator("#message").inner_text()

    event = ds.event(4, ["run", "event"])
    page.page.locator("#run").fill(str(event.run))
    page.page.locator("#event").fill(str(event.event))
    page.page.locator("#find").click()
    page.page.wait_for_function("() => window.giodDisplay.entry === 4 && window.giodDisplay.ready", timeout=120_000)
    assert not page.errors, page.errors


@pytest.mark.parametrize(("query", "status", "words"), [
    ("dataset=nope&entry=0", 404, "nope"),
    ("dataset=sim&entry=99", 404, "no entry 99"),
    ("dataset=weights&entry=0", 400, "nothing the display draws"),
    ("dataset=sim&entry=abc", 0, "not a whole number"),
])
def test_bad_input_is_a_clear_message(page, open_server, query, status, words):
    state = open_display(page, open_server.url, query)
    assert not state["ready"]
    assert state["error"]["status"] == status
    message = page.page.locator("#message")
    assert message.is_visible() and words in message.inner_text()
    if status:  # every view says it too, the WebGL 3-D view included
        page.page.wait_for_function("() => window.giodDisplay.renderer !== undefined", timeout=30_000)
        for view in ("view3d", "viewRphi", "viewRz"):
            assert words in page.page.locator(f"#{view}").inner_text(), view
    assert page.page.locator("#bar").is_visible()  # the controls stay: never a blank page
    # the browser reports the refused request itself; nothing else may fail
    assert [e for e in page.errors if "Failed to load resource" not in e] == []


def test_tokens_on_the_page(page, locked_server):
    state = open_display(page, locked_server.url, "dataset=sim&entry=1")
    assert state["error"]["status"] == 401
    assert "needs a token" in page.page.locator("#message").inner_text()
    page.page.locator("#token").fill(locked_server.token("read", "raw"))
    page.page.locator("#token-use").click()
    page.page.wait_for_function("() => window.giodDisplay.error && window.giodDisplay.error.status === 404",
                                timeout=60_000)
    assert "no dataset named 'sim'" in page.page.locator("#message").inner_text()
    page.page.locator("#token").fill(locked_server.token("read", "sim"))
    page.page.locator("#token-use").click()
    page.page.wait_for_function("() => window.giodDisplay.ready && window.giodDisplay.dataset === 'sim'",
                                timeout=120_000)
    assert page.page.locator("#message").is_hidden()


@pytest.mark.rootdata
def test_nanoaod_event_shows_jets_leptons_and_met(page, nano_root):
    import giod

    fed = giod.open(nano_root, create=False)
    entry = next(e for e in range(50) if len(fed["ttbar"].event(e, ["Muon"]).Muon) > 0)
    event = fed["ttbar"].event(entry, ["Jet", "Muon", "Electron"])
    with ServerThread(create_app(fed, anonymous_read=True)) as url:
        state = open_display(page, url, f"dataset=ttbar&entry={entry}")
        assert state["ready"], state["error"]
        c = state["counts"]
        assert (c["jets"], c["muons"], c["electrons"]) == (len(event.Jet), len(event.Muon), len(event.Electron))
        assert c["hits"] == c["tracks"] == c["ecal"] == 0 and c["met"] == 1
        rphi = pixels(page.page, "#viewRphi")
        assert near(rphi, (255, 42, 109)) > 20  # the muon line
        assert near(rphi, (199, 125, 255), tol=40) > 20  # the missing-energy arrow
        toggle(page, "muons")
        assert near(pixels(page.page, "#viewRphi"), (255, 42, 109)) < 5
    fed.close()
    assert not page.errors, page.errors


@pytest.mark.rootdata
def test_px_py_pz_e_event_shows_jets_muons_and_met(page, hzz_root):
    """uproot's HZZ sample (Px, Py, Pz, E; MET_px, MET_py) draws, where it had nothing the display draws."""
    import giod

    fed = giod.open(hzz_root, create=False)
    entry = next(e for e in range(50) if len(fed["hzz"].event(e, ["Muon"]).Muon) > 0)
    event = fed["hzz"].event(entry, ["Jet", "Muon"])
    with ServerThread(create_app(fed, anonymous_read=True)) as url:
        state = open_display(page, url, f"dataset=hzz&entry={entry}")
        assert state["ready"], state["error"]
        c = state["counts"]
        assert (c["jets"], c["muons"], c["met"]) == (len(event.Jet), len(event.Muon), 1)
        rphi = pixels(page.page, "#viewRphi")
        assert near(rphi, (255, 42, 109)) > 20  # the muon line
        assert near(rphi, (199, 125, 255), tol=40) > 20  # the missing-energy arrow
    fed.close()
    assert not page.errors, page.errors


# ------------------------------------------------------------------ federation browser


def test_federation_browser(page, open_server, sim):
    p = page.page
    p.goto(open_server.url + "/")
    p.wait_for_function("() => window.giodBrowser && window.giodBrowser.ready", timeout=60_000)
    rows = p.locator("#datasets tr[data-dataset]")
    assert sorted(rows.evaluate_all("rs => rs.map(r => r.dataset.dataset)")) == ["raw", "sim", "weights"]
    assert "6" in p.locator('#datasets tr[data-dataset="sim"]').inner_text()
    p.locator('#datasets tr[data-dataset="sim"]').click()
    p.wait_for_selector("#model-graph g.node[data-collection='jets']")
    nodes = p.locator("#model-graph g.node").evaluate_all("gs => gs.map(g => g.dataset.collection)")
    assert sorted(nodes) == sorted(sim["sim"].schema.collections)
    edges = p.locator("#model-graph path.edge").evaluate_all("ps => ps.map(p => p.dataset.relation)")
    assert {"jets.tracks", "jets.clusters", "tracks.hits", "clusters.cells"} <= set(edges)

    # replicas and their states, per database
    p.wait_for_selector("#databases tr[data-database]")
    p.locator("#databases tr[data-database]").first.click()
    p.wait_for_selector(".replica-state")
    states = p.locator(".replica-state").all_inner_texts()
    assert states and set(states) == {"good"}

    # search: a field name finds the datasets whose model has it
    p.locator("#search").fill("subdetector")
    visible = p.locator("#datasets tr[data-dataset]:not(.hidden-by-search)").evaluate_all(
        "rs => rs.map(r => r.dataset.dataset)")
    assert sorted(visible) == ["raw", "sim"]
    p.locator("#search").fill("")

    # live rates from /metrics: two samples make a rate, and the page's own requests count
    p.wait_for_function("() => window.giodBrowser.rates && window.giodBrowser.rates.samples >= 2", timeout=30_000)
    rates = p.evaluate("() => window.giodBrowser.rates")
    assert rates["requests_total"] > 5 and rates["requests_per_s"] > 0
    assert "/api/v1/datasets" in p.locator("#routes").inner_text()
    assert not page.errors, page.errors


def test_federation_browser_with_tokens(page, locked_server):
    p = page.page
    p.goto(locked_server.url + "/")
    p.wait_for_function("() => window.giodBrowser && window.giodBrowser.error", timeout=60_000)
    assert "needs a token" in p.locator("#message").inner_text()
    p.locator("#token").fill(locked_server.token("read"))
    p.locator("#token-use").click()
    p.wait_for_function("() => window.giodBrowser.ready", timeout=60_000)
    assert p.locator("#datasets tr[data-dataset]").count() == 3
    assert p.locator("#message").is_hidden()
