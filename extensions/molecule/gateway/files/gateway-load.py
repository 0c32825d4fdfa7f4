"""Test tools run on the gateway host (stdlib only), each until its stop file appears.

client URL LOG RATE MAX [KEY]: a bounded client load: RATE requests a second, MAX requests at most, each a
POST /generate of 8 tokens through the gateway (with KEY as a bearer token); one JSON line per request
(start, end, status, error).
monitor URL KEY LOG: the gateway's view of its workers every 0.25 s; one JSON line per sample
(time, [{url, healthy, status}]).
"""

import json
import os
import sys
import threading
import time
import urllib.error
import urllib.request

STOP = "/run/gateway-load.stop"


def log_line(handle, lock, record):
    with lock:
        handle.write(json.dumps(record) + "\n")
        handle.flush()


def one_request(url, key, handle, lock):
    body = json.dumps({"text": "Hi", "sampling_params": {"max_new_tokens": 8}}).encode()
    started, status, error = time.time(), None, None
    headers = {"Content-Type": "application/json"}
    if key:
        headers["Authorization"] = "Bearer " + key
    try:
        request = urllib.request.Request(url + "/generate", data=body, headers=headers)
        with urllib.request.urlopen(request, timeout=60) as response:
            status = response.status
            json.loads(response.read())
    except urllib.error.HTTPError as exc:
        status, error = exc.code, exc.read()[:200].decode("utf-8", "replace")
    except Exception as exc:  # noqa: BLE001 - every failure is recorded
        error = "%s: %s" % (type(exc).__name__, exc)
    log_line(handle, lock, {"start": started, "end": time.time(), "status": status, "error": error})


def client(url, path, rate, most, key=""):
    lock, threads = threading.Lock(), []
    with open(path, "a") as handle:
        start = time.time()
        for number in range(int(most)):
            if os.path.exists(STOP):
                break
            delay = start + number / float(rate) - time.time()
            if delay > 0:
                time.sleep(delay)
            thread = threading.Thread(target=one_request, args=(url, key, handle, lock))
            thread.start()
            threads.append(thread)
        for thread in threads:
            thread.join()


def monitor(url, key, path):
    with open(path, "a") as handle:
        while not os.path.exists(STOP):
            request = urllib.request.Request(url + "/workers", headers={"Authorization": "Bearer " + key})
            try:
                with urllib.request.urlopen(request, timeout=5) as response:
                    workers = [{"url": w["url"], "healthy": w.get("is_healthy"), "status": w.get("status")}
                               for w in json.loads(response.read())["workers"]]
            except Exception as exc:  # noqa: BLE001 - a gap is recorded as such
                workers = None
                handle.write(json.dumps({"time": time.time(), "error": str(exc)}) + "\n")
            if workers is not None:
                handle.write(json.dumps({"time": time.time(), "workers": workers}) + "\n")
            handle.flush()
            time.sleep(0.25)


if __name__ == "__main__":
    if sys.argv[1] == "client":
        client(*sys.argv[2:7])
    else:
        monitor(*sys.argv[2:5])
