"""A stock third-party XXL-JOB executor (pyxxl, from PyPI) for the admin's interoperability test.

Configured from the environment:

    PYXXL_ADMIN_URL     admin API base, e.g. http://127.0.0.1:8080/api/ (pyxxl wants the trailing /)
    PYXXL_APPNAME       executor appname (the group's appname)
    PYXXL_PORT          port to serve on at 127.0.0.1; 0 (default) picks a free one
    PYXXL_ACCESS_TOKEN  token sent as XXL-JOB-ACCESS-TOKEN (empty: none)
    PYXXL_WORK_DIR      where pyxxl keeps its own log and the run logs (default: current folder)

Prints "pyxxl executor listening on <url>" once the socket is bound, so the caller knows the
address it registers.
"""

import asyncio
import os
import socket
import sys

from aiohttp import web
from pyxxl import ExecutorConfig, JobHandler, PyxxlRunner
from pyxxl.ctx import g

handlers = JobHandler()


@handlers.register(name="pyxxl_ok")
async def pyxxl_ok():
    # The task logger writes the run's log file, which the admin reads through /log.
    g.logger.info("pyxxl_ok ran with params %r", g.xxl_run_data.executorParams)
    return "pyxxl ok"


@handlers.register(name="pyxxl_shard")
async def pyxxl_shard():
    data = g.xxl_run_data
    g.logger.info("pyxxl_shard shard %s/%s", data.broadcastIndex, data.broadcastTotal)
    # The callback's handleMsg carries the shard, so the admin can check what pyxxl saw.
    return "shard %s/%s" % (data.broadcastIndex, data.broadcastTotal)


@handlers.register(name="pyxxl_fail")
async def pyxxl_fail():
    g.logger.info("pyxxl_fail is about to raise")
    # pyxxl turns an exception into a callback with handleCode 500 and the message as handleMsg.
    raise RuntimeError("pyxxl_fail failed on purpose")


@handlers.register(name="pyxxl_slow")
async def pyxxl_slow():
    seconds = float(g.xxl_run_data.executorParams or "30")
    g.logger.info("pyxxl_slow started, sleeping %s s", seconds)
    # An await point: pyxxl's /kill cancels the task here and calls back "CancelledError".
    await asyncio.sleep(seconds)
    return "slept %s s" % seconds


async def exit_when_orphaned(_app):
    # If the test process dies without killing us, we are re-parented: stop instead of lingering.
    parent = os.getppid()

    async def watch():
        while os.getppid() == parent:
            await asyncio.sleep(0.5)
        os._exit(3)

    task = asyncio.create_task(watch())
    yield
    task.cancel()


def main():
    admin_url = os.environ["PYXXL_ADMIN_URL"]
    appname = os.environ["PYXXL_APPNAME"]
    port = int(os.environ.get("PYXXL_PORT", "0"))
    token = os.environ.get("PYXXL_ACCESS_TOKEN") or None
    work_dir = os.environ.get("PYXXL_WORK_DIR", ".")

    # Bind first, so that port 0 works and the registered address is the one actually served.
    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    sock.bind(("127.0.0.1", port))
    port = sock.getsockname()[1]
    url = "http://127.0.0.1:%d" % port

    log_dir = os.path.join(work_dir, "logs")
    os.makedirs(log_dir, exist_ok=True)
    config = ExecutorConfig(
        xxl_admin_baseurl=admin_url,
        executor_app_name=appname,
        access_token=token,
        executor_url=url,
        executor_listen_host="127.0.0.1",
        executor_listen_port=port,
        executor_log_path=os.path.join(work_dir, "pyxxl.log"),
        log_local_dir=log_dir,
        # pyxxl otherwise lets variables such as ACCESS_TOKEN or DEBUG override this configuration.
        dotenv_try=False,
        # Connection retries stay short so a stopped admin does not keep us alive for long.
        http_retry_times=2,
        http_retry_duration=1,
        http_timeout=5,
    )
    runner = PyxxlRunner(config, handler=handlers)
    app = runner.create_server_app()
    app.cleanup_ctx.append(exit_when_orphaned)
    print("pyxxl executor listening on %s" % url, flush=True)
    web.run_app(app, sock=sock, print=None)


if __name__ == "__main__":
    sys.exit(main())
