"""The web page at / in headless Chromium (Debian's chromium + chromium-driver, driven by selenium): loads the
voices and emotions, streams speech and plays it while drawing the waveform, clones a voice from an upload; and the
API reference at /docs renders this server's schema with nothing fetched from elsewhere."""

from __future__ import annotations

import os
import shutil
from collections.abc import Iterator
from pathlib import Path

import pytest

from .server_harness import LiveServer

CHROMIUM = shutil.which("chromium") or shutil.which("chromium-browser")
CHROMEDRIVER = shutil.which("chromedriver")
DATA = Path(__file__).resolve().parents[1] / "data"
WAIT_S = 60

pytestmark = pytest.mark.skipif(
    CHROMIUM is None or CHROMEDRIVER is None,
    reason="needs Debian's chromium and chromium-driver (apt-get install -y chromium chromium-driver; .ci/run does)",
)


@pytest.fixture(scope="module")
def page_server(tiny_model: Path, tmp_path_factory: pytest.TempPathFactory) -> Iterator[LiveServer]:
    with LiveServer(tiny_model, tmp_path_factory.mktemp("browser-voices")) as server:
        yield server


@pytest.fixture(scope="module")
def browser() -> Iterator[object]:
    from selenium import webdriver
    from selenium.webdriver.chrome.options import Options
    from selenium.webdriver.chrome.service import Service

    options = Options()
    assert CHROMIUM is not None and CHROMEDRIVER is not None
    options.binary_location = CHROMIUM
    for flag in (
        "--headless=new",
        "--no-sandbox",  # CI runs as root
        "--disable-dev-shm-usage",
        "--disable-gpu",
        "--autoplay-policy=no-user-gesture-required",
        "--window-size=1100,1000",
        "--no-first-run",
    ):
        options.add_argument(flag)
    # The driver path is given, so selenium never tries to download one.
    driver = webdriver.Chrome(service=Service(executable_path=CHROMEDRIVER), options=options)
    driver.set_script_timeout(WAIT_S)
    try:
        yield driver
    finally:
        driver.quit()


def _wait_state(driver: object, condition: str) -> None:
    from selenium.webdriver.support.ui import WebDriverWait

    WebDriverWait(driver, WAIT_S).until(lambda d: d.execute_script(f"return {condition};"))  # type: ignore[attr-defined]


def _canvas_has_waveform(driver: object) -> bool:
    script = """
        const c = document.getElementById('wave');
        const data = c.getContext('2d').getImageData(0, 0, c.width, c.height).data;
        let lit = 0;
        // Anything but the background colour (#0f1720) was drawn by the waveform.
        for (let i = 0; i < data.length; i += 4) if (data[i] !== 15 || data[i + 1] !== 23 || data[i + 2] !== 32) lit++;
        return lit;
    """
    return int(driver.execute_script(script)) > 100  # type: ignore[attr-defined]


def test_page_streams_speech_and_clones(page_server: LiveServer, browser: object, tmp_path: Path) -> None:
    from selenium.webdriver.common.by import By
    from selenium.webdriver.support.ui import Select

    d = browser
    d.get(page_server.url + "/")  # type: ignore[attr-defined]
    _wait_state(d, "window.rtvox && window.rtvox.status === 'ready'")
    voices = [o.get_attribute("value") for o in Select(d.find_element(By.ID, "voice")).options]  # type: ignore[attr-defined]
    assert voices == ["anna", "ben"]
    emotions = [o.get_attribute("value") for o in Select(d.find_element(By.ID, "emotion")).options]  # type: ignore[attr-defined]
    assert {"happy", "sad", "angry"} <= set(emotions)

    text = d.find_element(By.ID, "text")  # type: ignore[attr-defined]
    text.clear()
    text.send_keys("你好，这是浏览器里的流式语音。And this is the English part of the test.")
    Select(d.find_element(By.ID, "voice")).select_by_value("ben")  # type: ignore[attr-defined]
    Select(d.find_element(By.ID, "emotion")).select_by_value("happy")  # type: ignore[attr-defined]
    d.execute_script(  # type: ignore[attr-defined]
        "const s = document.getElementById('speed'); s.value = '1.5'; s.dispatchEvent(new Event('input'));"
    )
    assert d.find_element(By.ID, "speed-value").text == "1.50"  # type: ignore[attr-defined]
    d.find_element(By.ID, "speak").click()  # type: ignore[attr-defined]
    _wait_state(d, "window.rtvox.status === 'done' || window.rtvox.status === 'error'")
    state = d.execute_script("return window.rtvox;")  # type: ignore[attr-defined]
    assert state["status"] == "done", state
    assert state["samples"] > 1000 and state["ttfaMs"] is not None and state["chunks"] >= 1
    if os.environ.get("RTVOX_SCREENSHOT_DIR"):
        d.save_screenshot(str(Path(os.environ["RTVOX_SCREENSHOT_DIR"]) / "rtvox-page.png"))  # type: ignore[attr-defined]
    assert _canvas_has_waveform(d)
    assert d.find_element(By.ID, "download").is_displayed()  # type: ignore[attr-defined]

    # Clone a voice from an uploaded clip; the picker then offers and selects it, and it speaks.
    d.find_element(By.ID, "clone-name").send_keys("Browser clone")  # type: ignore[attr-defined]
    d.find_element(By.ID, "clone-file").send_keys(str(DATA / "speech_en_male_16k.wav"))  # type: ignore[attr-defined]
    d.find_element(By.ID, "clone").click()  # type: ignore[attr-defined]
    _wait_state(d, "document.getElementById('clone-status').textContent.startsWith('cloned')")
    selected = Select(d.find_element(By.ID, "voice")).first_selected_option.get_attribute("value")  # type: ignore[attr-defined]
    assert selected.startswith("voice_")
    d.find_element(By.ID, "speak").click()  # type: ignore[attr-defined]
    _wait_state(d, "window.rtvox.status === 'done' || window.rtvox.status === 'error'")
    assert d.execute_script("return window.rtvox.status;") == "done"  # type: ignore[attr-defined]


def _speak(d: object, url: str, text: str, until: str) -> str:
    """Open the page, speak `text`, wait for the JS condition `until`; the status line's text."""
    from selenium.webdriver.common.by import By

    d.get(url + "/")  # type: ignore[attr-defined]
    _wait_state(d, "window.rtvox && window.rtvox.status === 'ready'")
    d.find_element(By.ID, "text").clear()  # type: ignore[attr-defined]
    d.find_element(By.ID, "text").send_keys(text)  # type: ignore[attr-defined]
    d.find_element(By.ID, "speak").click()  # type: ignore[attr-defined]
    _wait_state(d, until)
    return str(d.find_element(By.ID, "status").text)  # type: ignore[attr-defined]


def test_page_shows_errors(page_server: LiveServer, browser: object) -> None:
    assert "nothing to speak" in _speak(browser, page_server.url, "。。。", "window.rtvox.status === 'error'")


def test_page_names_text_it_did_not_speak(page_server: LiveServer, browser: object) -> None:
    finished = "window.rtvox.status === 'done' || window.rtvox.status === 'error'"
    status = _speak(browser, page_server.url, "Hello there, Привет.", finished)
    assert browser.execute_script("return window.rtvox.status;") == "done"  # type: ignore[attr-defined]
    assert "not spoken" in status and "Привет" in status, status


# ------------------------------------------------------------------ the API reference at /docs


def _shown_operations(d: object) -> set[str]:
    from selenium.webdriver.common.by import By

    ops = d.find_elements(By.CSS_SELECTOR, "details.op")  # type: ignore[attr-defined]
    shown = [op for op in ops if op.is_displayed()]
    return {f"{op.get_attribute('data-method').upper()} {op.get_attribute('data-path')}" for op in shown}


def test_api_reference_renders_offline(page_server: LiveServer, browser: object) -> None:
    import requests
    from selenium.webdriver.common.by import By

    schema = requests.get(f"{page_server.url}/openapi.json", timeout=10).json()
    body = schema["paths"]["/v1/audio/speech"]["post"]["requestBody"]["content"]["application/json"]["schema"]
    speech_fields = schema["components"]["schemas"][body["$ref"].split("/")[-1]]["properties"]
    operations = {f"{m.upper()} {p}" for p, item in schema["paths"].items() for m in item}

    d = browser
    d.get_log("browser")  # type: ignore[attr-defined]  # drops what the earlier pages logged
    d.get(page_server.url + "/docs")  # type: ignore[attr-defined]
    _wait_state(d, "window.rtvoxDocs && window.rtvoxDocs.status !== 'loading'")
    assert d.execute_script("return window.rtvoxDocs;")["status"] == "ready"  # type: ignore[attr-defined]
    assert _shown_operations(d) == operations
    speech = d.find_element(By.CSS_SELECTOR, 'details.op[data-method="post"][data-path="/v1/audio/speech"]')  # type: ignore[attr-defined]
    assert "POST" in speech.find_element(By.TAG_NAME, "summary").text
    text_field = speech.find_element(By.CSS_SELECTOR, 'li[data-field="input"] > .field').text
    assert "string" in text_field and "required" in text_field
    assert f"maxLength {speech_fields['input']['maxLength']}" in text_field, text_field
    if os.environ.get("RTVOX_SCREENSHOT_DIR"):
        d.save_screenshot(str(Path(os.environ["RTVOX_SCREENSHOT_DIR"]) / "rtvox-docs.png"))  # type: ignore[attr-defined]

    search = d.find_element(By.ID, "filter")  # type: ignore[attr-defined]
    search.send_keys("voices")
    shown = _shown_operations(d)
    assert {"POST /v1/audio/voices", "DELETE /v1/audio/voices/{voice_id}"} <= shown
    assert "POST /v1/audio/speech" not in shown and "POST /v1/tts" not in shown
    search.clear()
    search.send_keys("post /v1/tts")
    assert _shown_operations(d) == {"POST /v1/tts"}

    # Everything the page loaded came from this server, and nothing went wrong on the way.
    hosts = d.execute_script(  # type: ignore[attr-defined]
        "return performance.getEntries().filter((e) => e.name.startsWith('http')).map((e) => new URL(e.name).host);"
    )
    assert set(hosts) == {f"127.0.0.1:{page_server.port}"}, hosts
    errors = [entry for entry in d.get_log("browser") if entry["level"] == "SEVERE"]  # type: ignore[attr-defined]
    assert not errors, errors
