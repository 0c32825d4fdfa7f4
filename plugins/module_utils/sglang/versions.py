# -*- coding: utf-8 -*-
# Copyright: inferops.gpu contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""The SGLang releases the collection supports, and what it relies on in each.

Everything the serving half reads in a real server (log texts, arguments, endpoints, response
fields, metric names) is named here once, with where each supported release has it
(``EVIDENCE``: a file inside the ``sglang`` package and a fragment of its source). The contract
step (``tools/sglang-contract.sh``, part of ``make test``) reads the real wheels of every version in
``SUPPORTED`` and fails, naming the entry, when a fragment moved; the rest of the collection imports
its texts from here, so nothing it relies on escapes that check.

Adding a release: add it to ``SUPPORTED`` and its wheel to ``tools/sglang-wheels.lock``, run the
contract step, and give every entry that fails the new release's fragment (README, "SGLang versions").
"""

from __future__ import annotations

import re

# The field-notes release first, then the newest one read (December 2026).
SUPPORTED = ('0.5.9', '0.5.23')
DEFAULT_VERSION = '0.5.9'

# --- log texts ---------------------------------------------------------------------------------
READY_LINE = 'The server is fired up and ready to roll!'
# The first line of every start of rank 0 (the parsed arguments): 0.5.9 prints the dataclass's repr,
# 0.5.23 a dict of the resolved values. Both are INFO: `--log-level warning` prints neither.
START_MARKERS = ('server_args=ServerArgs(', 'server_args={')
# A multi-node follower (--node-rank >= 1) never prints the ready line: when its schedulers are
# ready it starts a health server that answers 200 on /health and /health_generate, and blocks.
FOLLOWER_LINE = 'Dummy health check server started in background thread at'
# Optional model modules that fail to import: a WARNING on every healthy start, whatever it quotes.
IMPORT_WARNING = 'Ignore import error when loading '
CAPTURE_FAILED = 'Capture cuda graph failed'
RANK_DIED = 'scheduler died during initialization'
SIGTERM_LINE = 'SIGTERM received.'

# --- endpoints and fields -----------------------------------------------------------------------
HEALTH = '/health'
HEALTH_GENERATE = '/health_generate'
GENERATE = '/generate'
MODELS = '/v1/models'
LOADS = '/v1/loads'
METRICS = '/metrics'
# /health_generate waits up to this many seconds for its one-token answer before a 503: a busy,
# healthy server may take that long, so any probe of it waits longer.
HEALTH_CHECK_SECONDS = 20
# The JIT caches under one root, SGLANG_CACHE_DIR, as 0.5.23 lays them out (srt/environ.py,
# third_party_cache_defaults and SGLANG_DG_CACHE_DIR; setdefault, so explicit values win). 0.5.9
# reads SGLANG_CACHE_DIR for its torch.compile cache only: the server role sets every one itself.
CACHE_LAYOUT = {'TRITON_CACHE_DIR': 'triton', 'TORCHINDUCTOR_CACHE_DIR': 'inductor', 'CUDA_CACHE_PATH': 'nv',
                'FLASHINFER_WORKSPACE_BASE': '', 'SGLANG_DG_CACHE_DIR': 'deep_gemm'}
RUNNING_GAUGE = 'sglang:num_running_reqs'
QUEUED_GAUGE = 'sglang:num_queue_reqs'

# --- arguments ------------------------------------------------------------------------------------
# The arguments the role renders itself (sglang_server_input.OWNED_OPTIONS and the group's).
ROLE_ARGS = ('--model-path', '--host', '--port', '--config', '--served-model-name', '--trust-remote-code',
             '--enable-metrics', '--skip-server-warmup', '--node-rank', '--nnodes', '--dist-init-addr')
# The field notes' launch (8x Blackwell over PCIe), per release: the role's default arguments.
DEFAULT_ARGS = {
    '0.5.9': ('--tp', '8', '--cuda-graph-max-bs', '128', '--disable-custom-all-reduce'),
    '0.5.23': ('--tp', '8', '--cuda-graph-max-bs-decode', '128', '--disable-custom-all-reduce'),
}
# Options a release no longer takes: (option, first release without it, what replaces it).
REMOVED_ARGS = (
    ('--cuda-graph-max-bs', '0.5.23', '--cuda-graph-max-bs-decode (and --cuda-graph-max-bs-prefill)'),
    ('--cuda-graph-bs', '0.5.23', '--cuda-graph-bs-decode (and --cuda-graph-bs-prefill)'),
)

# --- where each supported release has it ------------------------------------------------------------
# name: {version: ((file inside the sglang package, fragment of its source), ...)}. A release with no
# key of its own is checked with the fragments of the newest older release that has one, so a release
# added to SUPPORTED fails every entry whose text moved; `()` says the release has no such thing.
_ENGINE = 'srt/entrypoints/engine.py'
_HTTP = 'srt/entrypoints/http_server.py'
_COMMON = 'srt/utils/common.py'
EVIDENCE = {
    'ready line': {
        '0.5.9': ((_HTTP, READY_LINE),),
        '0.5.23': ((_HTTP, READY_LINE),),
    },
    'start marker': {
        # f"{server_args=}" of the ServerArgs dataclass prints `server_args=ServerArgs(`.
        '0.5.9': ((_ENGINE, 'logger.info(f"{server_args=}")'), ('srt/server_args.py', 'class ServerArgs')),
        '0.5.23': ((_ENGINE, 'f"server_args={_server_args_for_logging(server_args)}"'),
                   (_ENGINE, 'return redact_watermark_secrets(server_args.resolved_dict())')),
    },
    'follower health server line': {
        '0.5.9': ((_COMMON, FOLLOWER_LINE),),
        '0.5.23': ((_COMMON, FOLLOWER_LINE),),
    },
    'follower health server routes': {
        '0.5.9': ((_COMMON, '@app.get("/health")'), (_COMMON, '@app.get("/health_generate")')),
        '0.5.23': ((_COMMON, '@app.get("/health")'), (_COMMON, '@app.get("/health_generate")')),
    },
    'import warning': {
        '0.5.9': (('srt/models/registry.py', 'Ignore import error when loading {name}: {e}'),),
        '0.5.23': (('srt/models/registry.py', 'Ignore import error when loading {name}: {e}'),),
    },
    # The argument check (arg_check.PROBE) builds the parser as prepare_server_args does, in the release.
    'argument parser': {
        '0.5.9': (('srt/server_args.py', '    @staticmethod\n    def add_cli_args(parser: argparse.ArgumentParser):'),
                  ('srt/server_args.py', '    parser = argparse.ArgumentParser()\n    ServerArgs.add_cli_args(parser)')),
        '0.5.23': (('srt/server_args.py', '    @staticmethod\n    def add_cli_args(parser: argparse.ArgumentParser):'),
                   ('srt/server_args.py', '    parser = argparse.ArgumentParser(prog="sglang serve")\n'
                                          '    ServerArgs.add_cli_args(parser)')),
    },
    'capture failure': {
        '0.5.9': (('srt/model_executor/cuda_graph_runner.py', 'f"Capture cuda graph failed: {e}'),),
        '0.5.23': (('srt/model_executor/runner/decode_cuda_graph_runner.py', 'f"Capture cuda graph failed: {e}'),),
    },
    'rank death at start': {
        '0.5.9': (),  # 0.5.9 says `Rank N scheduler is dead` (a rank_crash signature of its own)
        '0.5.23': ((_ENGINE, 'f"Rank {rank} scheduler died during initialization "'),),
    },
    # The failure signatures' SGLang texts (sglang_signatures; the flashinfer, torch, NCCL and
    # Hugging Face texts come from those packages, not from sglang).
    'cuDNN guard': {
        '0.5.9': (('srt/server_args.py', 'CuDNN Compatibility Issue Detected'),),
        '0.5.23': (),  # gone with torch 2.9.1
    },
    'kernel version check': {
        '0.5.9': ((_COMMON, 'is installed with version {installed_version}, which "\n'
                            '                f"is less than the minimum required version {min_version}. '),),
        '0.5.23': ((_COMMON, 'is installed with version {installed_version}, which "\n'
                             '                f"is less than the minimum required version {min_version}. '),),
    },
    'KV pool too small': {
        '0.5.9': (('srt/model_executor/model_runner_kv_cache_mixin.py',
                   'Not enough memory. Please try to increase --mem-fraction-static.'),),
        '0.5.23': (('srt/model_executor/pool_configurator.py',
                    'Not enough memory. Please try to increase --mem-fraction-static.'),),
    },
    'rank exception': {
        '0.5.9': (('srt/managers/scheduler.py', 'Scheduler hit an exception: {traceback}'),
                  (_ENGINE, 'Received sigquit from a child process. It usually means the child failed.'),
                  ('srt/managers/tokenizer_manager.py', 'It usually means one child failed.'),
                  (_ENGINE, 'Rank {i} scheduler is dead.'),
                  (_ENGINE, 'Initialization failed. Please see the error messages above')),
        '0.5.23': (('srt/managers/scheduler.py', 'Scheduler hit an exception: {traceback}'),
                   (_ENGINE, 'Received sigquit from a child process. It usually means the child failed.'),
                   ('srt/managers/tokenizer_manager.py', 'It usually means one child failed.'),
                   (_ENGINE, 'Initialization failed. Please see the error messages above')),
    },
    'warmup failure': {
        '0.5.9': ((_HTTP, 'Initialization failed. warmup error: {last_traceback}'),),
        '0.5.23': ((_HTTP, 'Initialization failed. warmup error: {last_traceback}'),),
    },
    'SIGTERM drain': {
        '0.5.9': (('srt/managers/tokenizer_manager.py', 'SIGTERM received. {signum=} {frame=}. Draining requests'),),
        '0.5.23': (('srt/managers/tokenizer_manager.py', 'SIGTERM received. {signum=} {frame=}. Draining requests'),),
    },
    'health check time': {
        '0.5.9': ((_HTTP, 'HEALTH_CHECK_TIMEOUT = int(os.getenv("SGLANG_HEALTH_CHECK_TIMEOUT", %d))' % HEALTH_CHECK_SECONDS),),
        '0.5.23': ((_HTTP, 'HEALTH_CHECK_TIMEOUT = int(os.getenv("SGLANG_HEALTH_CHECK_TIMEOUT", %d))' % HEALTH_CHECK_SECONDS),),
    },
    # A busy server is healthy while any request progresses (the stand-in answers so; the gateway's
    # and the liveness timer's probes of a loaded node rely on it).
    'health passes on any answer': {
        '0.5.9': ((_HTTP, 'if _global_state.tokenizer_manager.last_receive_tstamp > tic:'),),
        '0.5.23': ((_HTTP, 'if _global_state.tokenizer_manager.last_receive_tstamp > tic:'),),
    },
    'one cache root': {
        '0.5.9': (),
        '0.5.23': (('srt/environ.py', '"TRITON_CACHE_DIR": os.path.join(base, "triton")'),
                   ('srt/environ.py', '"TORCHINDUCTOR_CACHE_DIR": os.path.join(base, "inductor")'),
                   ('srt/environ.py', '"CUDA_CACHE_PATH": os.path.join(base, "nv")'),
                   ('srt/environ.py', '"FLASHINFER_WORKSPACE_BASE": base,'),
                   ('srt/environ.py', 'SGLANG_DG_CACHE_DIR = EnvStr(lambda: _default_cache_subdir("deep_gemm"))')),
    },
    'health endpoints': {
        '0.5.9': ((_HTTP, '@app.get("/health")'), (_HTTP, '@app.get("/health_generate")')),
        '0.5.23': ((_HTTP, '@app.get("/health")'), (_HTTP, '@app.get("/health_generate")')),
    },
    'generate endpoint': {
        '0.5.9': ((_HTTP, '@app.api_route("/generate", methods=["POST", "PUT"])'),),
        '0.5.23': ((_HTTP, '@app.api_route(\n    "/generate",\n    methods=["POST", "PUT"],'),),
    },
    'models endpoint': {
        '0.5.9': ((_HTTP, '@app.get("/v1/models"'),),
        '0.5.23': ((_HTTP, '@app.get("/v1/models"'),),
    },
    'loads endpoint': {
        '0.5.9': (('srt/entrypoints/v1_loads.py', '@router.get("/v1/loads")'),),
        '0.5.23': (('srt/entrypoints/v1_loads.py', '@router.get("/v1/loads")'),),
    },
    'loads fields': {
        '0.5.9': (('srt/managers/io_struct.py', 'num_running_reqs: int'),
                  ('srt/managers/io_struct.py', 'num_waiting_reqs: int')),
        '0.5.23': (('srt/managers/load_snapshot.py', 'num_running_reqs: int = 0'),
                   ('srt/managers/load_snapshot.py', 'num_waiting_reqs: int = 0')),
    },
    'running gauge': {
        '0.5.9': (('srt/metrics/collector.py', 'name="%s"' % RUNNING_GAUGE),),
        '0.5.23': (('srt/observability/metrics_collector.py', 'name="%s"' % RUNNING_GAUGE),),
    },
    'queued gauge': {
        '0.5.9': (('srt/metrics/collector.py', 'name="%s"' % QUEUED_GAUGE),),
        '0.5.23': (('srt/observability/metrics_collector.py', 'name="%s"' % QUEUED_GAUGE),),
    },
}

_VERSION = re.compile(r'^\s*v?([0-9]+(?:\.[0-9]+)*)')


def parse(version):
    """(0, 5, 23) for '0.5.23', '0.5.23.post1' or '0.5.23+cu130'; None when it is no version."""
    match = _VERSION.match(str(version or ''))
    if not match:
        return None
    return tuple(int(part) for part in match.group(1).split('.'))


def series(version):
    """The newest supported release not newer than `version` (whose arguments and texts it is
    rendered with), or the oldest when it is older than all of them or no version at all."""
    wanted = parse(version)
    chosen = SUPPORTED[0]
    if wanted is None:
        return chosen
    for known in sorted(SUPPORTED, key=parse):
        if parse(known) <= wanted:
            chosen = known
    return chosen


def is_supported(version):
    wanted = parse(version)
    return wanted is not None and any(parse(known) == wanted[:len(parse(known))] for known in SUPPORTED)


def prints_info(log_level):
    """Whether a server started with this --log-level prints INFO lines (the ready line, the start
    marker); SGLang's default is info. Its configure_logger sets the root logger to that level."""
    return str(log_level or 'info').strip().lower() in ('debug', 'info')


def default_args(version):
    """The field notes' launch as `version` takes it."""
    return list(DEFAULT_ARGS[series(version)])


def _option_names(args):
    for arg in args:
        arg = str(arg)
        if arg.startswith('--'):
            yield arg.split('=', 1)[0]


def removed_arg_problems(args, version):
    """What in `args` the release `version` no longer takes, each with what replaces it."""
    wanted = parse(version)
    if wanted is None:
        return []
    problems = []
    for name in _option_names(args):
        for option, since, use in REMOVED_ARGS:
            if name == option and wanted >= parse(since):
                problems.append('%s is gone in sglang %s (argparse exits 2: "ambiguous option"); use %s'
                                % (option, since, use))
    return problems
