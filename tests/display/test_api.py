"""The event API and the pages over a real server: scenes, Phoenix JSON, navigation, tokens, bad input."""

from __future__ import annotations

import gzip
import json

import pytest
import urllib3

from giod.display import event_scene, phoenix_event

HTTP = urllib3.PoolManager(retries=False, timeout=60)


def get(url: str, token: str | None = None, **headers: str) -> urllib3.BaseHTTPResponse:
    if token is not None:
        headers["Authorization"] = f"Bearer {token}"
    return HTTP.request("GET", url, headers=headers, decode_content=True)


def body(r: urllib3.BaseHTTPResponse) -> dict:
    return json.loads(r.data)


def test_scene_and_phoenix_over_http(open_server, sim):
    r = get(f"{open_server.url}/api/v1/events/sim/2")
    assert r.status == 200 and r.headers["content-type"] == "application/json"
    scene = body(r)
    expected = event_scene(sim["sim"], 2)
    assert scene["objects"]["hits"]["fields"] == expected["objects"]["hits"]["fields"]
    assert scene["entries"] == 6
    r = get(f"{open_server.url}/api/v1/events/sim/2?format=phoenix")
    assert r.status == 200
    assert body(r) == json.loads(json.dumps(phoenix_event(sim["sim"], 2)))
    assert "sim-2.phoenix.json" in r.headers["content-disposition"]


def test_large_answers_are_gzipped_when_asked(open_server):
    raw = HTTP.request("GET", f"{open_server.url}/api/v1/events/sim/0", headers={"Accept-Encoding": "gzip"},
                       decode_content=False, preload_content=True)
    assert raw.headers.get("content-encoding") == "gzip"
    assert json.loads(gzip.decompress(raw.data))["entry"] == 0
    plain = HTTP.request("GET", f"{open_server.url}/api/v1/events/sim/0", headers={"Accept-Encoding": "identity"})
    assert "content-encoding" not in plain.headers
    assert json.loads(plain.data)["entry"] == 0


@pytest.mark.parametrize(("path", "status", "error", "words"), [
    ("/api/v1/events/nope/0", 404, "NotFound", "nope"),
    ("/api/v1/events/sim/6", 404, "NotFound", "no entry 6 (entries 0..5)"),
    ("/api/v1/events/sim/-1", 404, "NotFound", "negative"),
    ("/api/v1/events/sim/abc", 400, "DataError", "entry"),
    ("/api/v1/events/sim/0?format=root", 400, "DataError", "format"),
    ("/api/v1/events/weights/0", 400, "DataError", "nothing the display draws"),
    ("/api/v1/events/sim/next?where=njets%20%3E%3D", 400, "ExpressionError", ""),
    ("/api/v1/events/sim/next?where=nosuchtag%20%3E%201", 400, "ExpressionError", "nosuchtag"),
    ("/api/v1/events/sim/next?where=njets%20%3E%2099", 404, "NotFound", "no event passing"),
    ("/api/v1/events/sim/lookup?run=1&event=999", 404, "NotFound", "run 1 and event 999"),
    ("/api/v1/events/weights/lookup?run=1&event=1", 400, "DataError", "no run and event tags"),
    ("/api/v1/models/nope", 404, "NotFound", "nope"),
])
def test_bad_input_is_a_clear_4xx(open_server, path, status, error, words):
    r = get(open_server.url + path)
    assert r.status == status, r.data
    answer = body(r)
    assert answer["error"] == error
    assert words in answer["message"]


def test_next_and_previous_event_passing_an_expression(open_server, sim):
    ds = sim["sim"]
    passing = ds.select("njets >= 2").entries().tolist()
    assert len(passing) >= 2  # the sample has di-jet events
    found, after = [], -1
    while True:
        r = get(f"{open_server.url}/api/v1/events/sim/next?after={after}&where=njets%20%3E%3D%202")
        if r.status == 404:
            assert "no event passing" in body(r)["message"]
            break
        answer = body(r)
        assert answer["passing"] == len(passing)
        found.append(answer["entry"])
        after = answer["entry"]
    assert found == passing
    r = get(f"{open_server.url}/api/v1/events/sim/next?after={passing[-1]}&direction=prev&where=njets%20%3E%3D%202")
    assert body(r)["entry"] == passing[-2]
    # without an expression: every event in turn
    assert body(get(f"{open_server.url}/api/v1/events/sim/next?after=3"))["entry"] == 4


def test_the_entries_kept_for_next_are_bounded_in_bytes(sim_root, sim):
    from giod.server.app import ServerThread, create_app
    from giod.server.cache import EntriesCache

    ds = sim["sim"]
    every = ds.select(None).entries()
    app = create_app(str(sim_root), anonymous_read=True)
    # room for one list of every event, not two
    kept = app.state.giod.extra["display_entries"] = EntriesCache(max_entries=4, capacity=every.nbytes * 3 // 2)
    with ServerThread(app) as url:
        for where in ("", "njets >= 0", "njets >= 1", "njets >= 2", "ht > 0", "njets >= 0", ""):
            answer = body(get(f"{url}/api/v1/events/sim/next?after=-1&where={where.replace(' ', '%20')}"))
            assert answer["passing"] == len(ds.select(where or None).entries())
            assert len(kept) <= 4 and kept.held <= kept.capacity
        assert len(kept) >= 1


def test_lookup_by_run_and_event(open_server, sim):
    event = sim["sim"].event(4, ["run", "event"])
    r = get(f"{open_server.url}/api/v1/events/sim/lookup?run={event.run}&event={event.event}")
    assert r.status == 200
    assert body(r)["entry"] == 4


def test_model_as_json(open_server, sim):
    model = body(get(f"{open_server.url}/api/v1/models/sim"))
    by_name = {c["name"]: c for c in model["collections"]}
    assert set(by_name) == set(sim["sim"].schema.collections)
    assert {"name": "tracks", "target": "tracks", "many": True, "doc": ""} in by_name["jets"]["relations"]
    assert by_name["jets"]["role"] == "jets" and by_name["mcparticles"]["role"] is None
    assert {f["name"] for f in by_name["tracker_hits"]["fields"]} >= {"x", "y", "z", "layer"}
    assert "njets" in {t["name"] for t in model["tags"]}
    assert model["containers"]["reco"] == ["clusters", "jets", "tracks"]


def test_tokens(locked_server):
    url = f"{locked_server.url}/api/v1/events/sim/0"
    r = get(url)
    assert r.status == 401 and body(r)["error"] == "AuthError"
    assert get(url, token="giod_not-a-token").status == 401
    other = locked_server.token("read", "raw")
    r = get(url, token=other)
    # a dataset the token may not see is answered as one that does not exist (docs/security.md)
    assert r.status == 404 and body(r)["message"] == "no dataset named 'sim'"
    assert get(url, token=locked_server.token("read", "sim")).status == 200
    assert get(f"{locked_server.url}/api/v1/events/raw/0?format=phoenix", token=other).status == 200


def test_pages_and_scripts_need_no_token(locked_server):
    for path, kind in [("/", "text/html"), ("/display", "text/html"), ("/static/display.js", "javascript"),
                       ("/static/browser.js", "javascript"), ("/static/common.js", "javascript"),
                       ("/static/style.css", "text/css")]:
        r = get(locked_server.url + path)
        assert r.status == 200, path
        assert kind in r.headers["content-type"], path
    assert b"<title>giod event display</title>" in get(locked_server.url + "/display").data
    assert get(locked_server.url + "/static/../catalog.sqlite").status == 404


def test_plotly_comes_from_the_python_package(open_server):
    from importlib import resources

    shipped = resources.files("plotly").joinpath("package_data", "plotly.min.js").read_bytes()
    r = HTTP.request("GET", f"{open_server.url}/vendor/plotly.min.js", headers={"Accept-Encoding": "gzip"},
                     decode_content=False)
    assert r.status == 200 and r.headers["content-encoding"] == "gzip"
    served = gzip.decompress(r.data)
    # the package's file, after one line: V8's hint to compile it all while it streams in
    assert served.endswith(shipped) and served[: -len(shipped)] == b"//# allFunctionsCalledOnLoad\n"
    assert "max-age" in r.headers["cache-control"]
    # a revalidation with the ETag costs no body while the installed plotly is unchanged
    again = HTTP.request("GET", f"{open_server.url}/vendor/plotly.min.js",
                         headers={"Accept-Encoding": "gzip", "If-None-Match": r.headers["etag"]})
    assert again.status == 304 and not again.data
    other = HTTP.request("GET", f"{open_server.url}/vendor/plotly.min.js", headers={"If-None-Match": '"other"'})
    assert other.status == 200 and other.data == served
