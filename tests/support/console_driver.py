"""Drives the web console in headless Chromium through WebDriver
(chromedriver), with Selenium from the compatibility venv.

    console_driver.py live URL STORE KEY VALUE SCREENSHOT
    console_driver.py replay URL STORE
    console_driver.py rebuild URL
    console_driver.py broker URL TOPIC GROUP

Each step it passes is printed as one line on stdout, which the Rust test
reads (and answers by changing what the app does: the console is watched
while it moves). Any failure prints why, with the page's text, on stderr
and exits 1.

live:   the topology shows both processors; the lag rises above 0, then
        falls to 0 ("lag-seen", then "caught-up"); a lookup of KEY in
        STORE answers VALUE; a screenshot is saved.
replay: the topology shows both processors; the replay's progress bar
        takes several values below 100% ("progress-moving"), then reaches
        100% ("progress-done"); its diff against live shows one key of
        STORE with a different value and none only in live, and a derived
        partition differing from some offset on ("diff").
rebuild: the title names the rebuild; the topology shows both
        processors; the rebuild's progress bar takes several values below
        100% ("progress-moving").
broker: the topics table lists TOPIC ("topics"); the groups table lists
        GROUP on TOPIC with a lag above 0 in records and in time ("groups").
All:    the page logged no error to the browser's console.
"""

import shutil
import sys
import time

from selenium import webdriver
from selenium.common.exceptions import StaleElementReferenceException, WebDriverException
from selenium.webdriver.chrome.service import Service
from selenium.webdriver.common.by import By

# How long one step may take on a loaded machine.
STEP_SECONDS = 120
# How often the page reads /metrics, in ms.
EVERY_MS = 200


def browser():
    options = webdriver.ChromeOptions()
    options.binary_location = shutil.which("chromium") or "/usr/bin/chromium"
    for argument in [
        "--headless=new",
        "--no-sandbox",
        "--disable-dev-shm-usage",
        "--disable-gpu",
        "--window-size=1280,1500",
    ]:
        options.add_argument(argument)
    options.set_capability("goog:loggingPrefs", {"browser": "ALL"})
    driver_path = shutil.which("chromedriver") or "/usr/bin/chromedriver"
    return webdriver.Chrome(service=Service(driver_path), options=options)


def step(name, *details):
    print(" ".join([name, *map(str, details)]), flush=True)


def fail(driver, why):
    try:
        page = driver.find_element(By.TAG_NAME, "body").text
    except WebDriverException:
        page = "(the page could not be read)"
    print(f"console test failed: {why}\n--- the page ---\n{page}", file=sys.stderr, flush=True)
    sys.exit(1)


def wait_for(driver, what, check):
    """Polls `check` (a value or None) until it answers, or fails."""
    deadline = time.monotonic() + STEP_SECONDS
    while time.monotonic() < deadline:
        try:
            value = check()
        except (StaleElementReferenceException, WebDriverException, ValueError):
            value = None
        if value is not None and value is not False:
            return value
        time.sleep(0.05)
    fail(driver, f"{what}: not within {STEP_SECONDS} s")


def text_of(driver, selector):
    return driver.find_element(By.CSS_SELECTOR, selector).text


def check_topology(driver):
    def processors():
        nodes = driver.find_elements(By.CSS_SELECTOR, "#topology g.node[data-kind=processor]")
        names = {node.get_attribute("data-name") for node in nodes}
        return names if {"split", "count"} <= names else None

    names = wait_for(driver, "the topology shows split and count", processors)
    step("topology", *sorted(names))


def check_no_errors(driver):
    errors = [entry for entry in driver.get_log("browser") if entry["level"] == "SEVERE"]
    if errors:
        fail(driver, f"the page logged errors: {errors}")


def live(driver, url, store, key, value, screenshot):
    driver.get(f"{url}?every={EVERY_MS}")
    check_topology(driver)
    lag = wait_for(driver, "the lag rises above 0", lambda: int(text_of(driver, "#lag-total")) or None)
    step("lag-seen", lag)
    wait_for(driver, "the lag falls to 0", lambda: text_of(driver, "#lag-total") == "0")
    step("caught-up")

    # The form is drawn again with each reading unless a field has the
    # focus; an element replaced mid-way is found again.
    def look_up():
        driver.find_element(By.CSS_SELECTOR, f"#lookup-store option[value='{store}']").click()
        field = driver.find_element(By.ID, "lookup-key")
        field.click()
        field.clear()
        field.send_keys(key)
        driver.find_element(By.ID, "lookup-go").click()
        return True

    # The total lag can read 0 while the last words are still to be
    # shipped: the lookup is asked again until it answers the value.
    expected = f'"value": {value}'
    asked = [0.0]

    def answered():
        text = text_of(driver, "#lookup-result")
        if expected in text:
            return text
        if time.monotonic() - asked[0] > 1.0:
            look_up()
            asked[0] = time.monotonic()
        return None

    answer = wait_for(driver, f"the lookup of {key} answers {value}", answered)
    step("lookup", answer.splitlines()[0])
    # The figures settle (rates over a few readings) before the picture.
    time.sleep(2)
    driver.save_screenshot(screenshot)
    step("screenshot", screenshot)
    check_no_errors(driver)


def rows(driver, selector):
    # Read in one script, all at once: cell by cell, a page drawn again
    # meanwhile (each reading) left every read stale on a loaded machine.
    return driver.execute_script(
        "return Array.from(document.querySelectorAll(arguments[0] + ' tbody tr'),"
        " tr => Array.from(tr.querySelectorAll('td'), td => td.innerText.trim()));",
        selector,
    )


def check_progress_moving(driver, job):
    def seen():
        values = driver.find_element(By.ID, "job-progress").get_attribute("data-seen")
        return [float(v) for v in values.split(",") if v]

    def moving():
        below = sorted({v for v in seen() if v < 100.0})
        return below if len(below) >= 3 else None

    values = wait_for(driver, f"the {job}'s progress takes several values below 100%", moving)
    step("progress-moving", *values[:5])


def replay(driver, url, store):
    driver.get(f"{url}?every={EVERY_MS}")
    check_topology(driver)
    check_progress_moving(driver, "replay")
    wait_for(driver, "the replay's progress reaches 100%", lambda: text_of(driver, "#job-percent") == "100.0%")
    step("progress-done")

    # store, different values, only in the replay, only in live
    def store_differs():
        row = next((r for r in rows(driver, "#diff-stores") if r and r[0] == store), None)
        return row if row and row[1:] == ["1", "0", "0"] else None

    # topic, partition, replayed, live, differing, first difference at
    def partition_differs():
        return next((r for r in rows(driver, "#diff-topics") if len(r) == 6 and r[4] != "0" and r[5] != "–"), None)

    row = wait_for(driver, f"the diff shows one key of {store} different, none only in live", store_differs)
    topic = wait_for(driver, "the diff shows a derived partition differing", partition_differs)
    # The page is drawn again with each reading: an element replaced
    # mid-way is found again.
    wait_for(driver, "the diff's verdict is 'differs'", lambda: driver.find_element(By.ID, "diff").get_attribute("data-differs") == "true")
    step("diff", *row, *topic)
    check_no_errors(driver)


def rebuild(driver, url):
    driver.get(f"{url}?every={EVERY_MS}")
    title = wait_for(driver, "the title names the rebuild", lambda: "rebuild of version" in text_of(driver, "#title") and text_of(driver, "#title"))
    step("title", title)
    check_topology(driver)
    check_progress_moving(driver, "rebuild")
    check_no_errors(driver)


def broker(driver, url, topic, group):
    driver.get(f"{url}?every={EVERY_MS}")

    def row(table, first):
        for tr in driver.find_elements(By.CSS_SELECTOR, f"#{table} tbody tr"):
            cells = [td.text for td in tr.find_elements(By.TAG_NAME, "td")]
            if cells and cells[0] == first:
                return cells
        return None

    cells = wait_for(driver, f"the topics table lists {topic}", lambda: row("topics", topic))
    step("topics", *cells[:4])

    def behind():
        cells = row("groups", group)
        # group, topic, lag, lag in time, …
        return cells if cells and cells[1] == topic and cells[2] != "0" and cells[3].endswith("min") else None

    cells = wait_for(driver, f"the groups table shows {group} behind on {topic}", behind)
    step("groups", *cells[:4])
    check_no_errors(driver)


def main():
    mode, url = sys.argv[1], sys.argv[2]
    driver = browser()
    try:
        if mode == "live":
            live(driver, url, *sys.argv[3:7])
        elif mode == "replay":
            replay(driver, url, sys.argv[3])
        elif mode == "rebuild":
            rebuild(driver, url)
        elif mode == "broker":
            broker(driver, url, *sys.argv[3:5])
        else:
            fail(driver, f"unknown mode {mode}")
    finally:
        driver.quit()
    step("ok")


if __name__ == "__main__":
    main()
