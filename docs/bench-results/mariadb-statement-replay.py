#!/usr/bin/env python3
"""Replays the MariaDB writes of Shardline's fire path, phase by phase, and prints the CPU the
server spent per 1 000 fires in each (from /proc/<mariadbd>/stat, so run it on the server's
machine with nothing else using the server).

    python3 docs/bench-results/mariadb-statement-replay.py [--fires 20000] [--rounds 2]

It creates the database `shardline_replay` with the project's MySQL migrations, 10 000 jobs and
300 000 finished fires, then per round writes `--fires` new fires (one run each) in batches of
500, as the admin does: the claim's insert, the jobs' advance, the claim's read-back (MySQL
only; MariaDB 10.5+ returns the rows), the start (lock, state, runs insert), the runs' read-back,
the old send stamp, and the results writer (lock runs, joined update, lock fires, run counts,
fire states). The statements go as text through the `mysql` client, not prepared as the admin
sends them, so parsing costs a little more here. The database is dropped at the end.
"""
import argparse
import glob
import os
import subprocess
import time

DB = "shardline_replay"
ROOT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..")
BATCH = 500
JOINED_CHUNK = 160


def mysql(sql, db=DB):
    subprocess.run(["mysql", "-uroot", db], input=sql.encode(), check=True,
                   stdout=subprocess.DEVNULL)


def server_cpu_ms():
    pid = subprocess.run(["pidof", "mariadbd"], capture_output=True, text=True).stdout.split()[0]
    fields = open(f"/proc/{pid}/stat").read().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) * 1000 / os.sysconf("SC_CLK_TCK")


def phases(first_id, n, t0):
    """The SQL of each phase for fires (and runs) first_id .. first_id + n."""
    out = {}
    for b in range(first_id, first_id + n, BATCH):
        ids = list(range(b, min(b + BATCH, first_id + n)))
        job = {f: f % 10_000 + 1 for f in ids}
        at = {f: t0 + (f - first_id) * 100 for f in ids}
        idl = ",".join(map(str, ids))
        rows = ",".join(
            f"({f},{job[f]},1,'CRON',{at[f]},'{job[f]}:{at[f]}','','scheduled',0,'','node-a',"
            f"{at[f] + 3000},0,0,{t0})" for f in ids)
        out.setdefault("claim: insert fires", []).append(
            "INSERT IGNORE INTO fires (id, job_id, group_id, trigger_type, planned_at, sched_key, "
            "params, state, total_items, message, owner, claim_expires_at, children_done, "
            f"alarm_state, created_at) VALUES {rows};")
        jv = " UNION ALL ".join(
            (f"SELECT {job[f]} AS column1, {at[f]} AS column2" if i == 0
             else f"SELECT {job[f]}, {at[f]}") for i, f in enumerate(ids))
        out.setdefault("claim: advance jobs", []).append(
            f"UPDATE jobs JOIN ({jv}) AS v ON jobs.id = v.column1 "
            "SET next_fire_at = v.column2 + 1000, last_fire_at = v.column2 WHERE 1 = 1;")
        keys = ",".join(f"'{job[f]}:{at[f]}'" for f in ids)
        out.setdefault("claim: read back (MySQL only)", []).append(
            "SELECT id, job_id, planned_at FROM fires WHERE state = 'scheduled' "
            f"AND owner = 'node-a' AND sched_key IN ({keys});")
        runs = ",".join(
            f"({f},{f},{job[f]},1,0,1,0,0,'http://127.0.0.1:9999/','h','',NULL,'triggering',0,'',"
            f"0,'',{t0},{t0})" for f in ids)
        out.setdefault("start: lock, state, insert runs", []).append(
            "BEGIN; SELECT id FROM fires WHERE +state = 'scheduled' AND owner = 'node-a' "
            f"AND id IN ({idl}) FOR UPDATE; UPDATE fires SET claim_expires_at = 0, total_items = 1, "
            f"state = 'triggering' WHERE 1 = 1 AND id IN ({idl}); INSERT INTO runs (id, fire_id, "
            "job_id, group_id, shard_index, shard_total, attempt, superseded, executor_address, "
            "handler, params, item_param, state, trigger_code, trigger_msg, handle_code, "
            f"handle_msg, log_date_time, created_at) VALUES {runs}; COMMIT;")
        out.setdefault("start: read runs back (MySQL only)", []).append(
            f"SELECT id, fire_id, shard_index FROM runs WHERE superseded = 0 AND fire_id IN ({idl});")
        out.setdefault("send stamp (removed)", []).append(
            f"UPDATE fires SET dispatched_at = {t0 + 5} WHERE dispatched_at = 0 "
            f"AND id IN ({idl});")
        writer = ["BEGIN;", f"SELECT id, fire_id, state FROM runs WHERE 1 = 1 AND id IN ({idl}) "
                  "FOR UPDATE;"]
        for c in range(0, len(ids), JOINED_CHUNK):
            chunk = ids[c:c + JOINED_CHUNK]
            jv = " UNION ALL ".join(
                (f"SELECT {r} AS column1, {t0 + 7} AS column2" if i == 0
                 else f"SELECT {r}, {t0 + 7}") for i, r in enumerate(chunk))
            writer.append(
                f"UPDATE runs JOIN ({jv}) AS v ON runs.id = v.column1 SET executor_address = "
                "'http://127.0.0.1:9999/', trigger_code = 200, trigger_msg = '', dispatched_at = "
                "v.column2, state = 'succeeded', handle_code = 200, handle_msg = '', finished_at = "
                f"{t0 + 9} WHERE 1 = 1 AND +state IN ('triggering', 'running');")
        writer.append(
            f"SELECT id, job_id, state FROM fires WHERE 1 = 1 AND id IN ({idl}) FOR UPDATE; "
            "SELECT fire_id, state, COUNT(*) FROM runs WHERE superseded = 0 "
            f"AND fire_id IN ({idl}) GROUP BY fire_id, state; UPDATE fires SET state = "
            f"'succeeded', finished_at = {t0 + 9}, dispatched_at = COALESCE(NULLIF(dispatched_at, 0), "
            f"{t0 + 5}) WHERE 1 = 1 AND id IN ({idl}); COMMIT;")
        out.setdefault("results writer", []).append(" ".join(writer))
    return out


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--fires", type=int, default=20_000)
    p.add_argument("--rounds", type=int, default=2)
    a = p.parse_args()
    mysql(f"DROP DATABASE IF EXISTS {DB}; CREATE DATABASE {DB};", db="")
    for f in sorted(glob.glob(os.path.join(ROOT, "migrations", "mysql", "*.sql"))):
        mysql(open(f).read())
    jobs = ",".join(
        f"(1,'job-{j}','','CRON','* * * * * ?','','h','','FIRST','SERIAL','DO_NOTHING','','','',"
        "1,1000,1,1)" for j in range(1, 10_001))
    mysql("INSERT INTO jobs (group_id, name, description, schedule_type, schedule_conf, timezone, "
          "handler, params, route_strategy, block_strategy, misfire_strategy, item_params, "
          f"glue_source, alarm_targets, enabled, next_fire_at, created_at, updated_at) VALUES {jobs};")
    for b in range(1, 300_001, 1_000):
        mysql("INSERT INTO fires (id, job_id, group_id, trigger_type, planned_at, params, state, "
              "message, created_at) VALUES " + ",".join(
                  f"({f},{f % 10_000 + 1},1,'CRON',{f},'','succeeded','',{f})"
                  for f in range(b, b + 1_000)) + ";")
    first = 1_000_000
    for r in range(a.rounds):
        print(f"round {r + 1}: mariadbd CPU per 1 000 fires")
        for name, stmts in phases(first, a.fires, int(time.time() * 1000)).items():
            before = server_cpu_ms()
            mysql("\n".join(stmts))
            print(f"  {name:36s} {(server_cpu_ms() - before) * 1000 / a.fires:6.1f} ms")
        first += a.fires
    mysql(f"DROP DATABASE {DB};", db="")


if __name__ == "__main__":
    main()
