// Shardline console: a small single-page app over /api/v1, authenticated by the session cookie.
// Every state-changing call sends the session's CSRF token (from the page's <meta>) in X-CSRF-Token.
// The DOM is built with createElement/textContent only, so data from the API is never parsed as HTML.
(function () {
  'use strict';

  const BOOT = JSON.parse(document.getElementById('boot').textContent);
  const CSRF = document.querySelector('meta[name="csrf-token"]').getAttribute('content');
  const ME = BOOT.user;
  const IS_ADMIN = ME.role === 'ADMIN';
  const PAGE = 20;
  let lang = ME.lang === 'zh' ? 'zh' : 'en';
  // Timers and other clean-ups of the page on screen; run when the route changes. A page takes its
  // hook with onLeave() before its first await, so a page left while loading still stops its timers.
  let leaveList = [];
  function onLeave() {
    const list = leaveList;
    return (fn) => list.push(fn);
  }

  // ---------------------------------------------------------------- text

  function t(key, vars) {
    const dict = window.SL_I18N[lang] || window.SL_I18N.en;
    let s = dict[key];
    if (s === undefined) s = window.SL_I18N.en[key];
    if (s === undefined) s = key;
    if (vars) s = s.replace(/\{(\w+)\}/g, (_, n) => (vars[n] === undefined ? '' : String(vars[n])));
    return s;
  }

  // Enum values are shown translated with the raw value after them, the words users know from XXL-JOB.
  function enumLabel(kind, value) {
    const key = kind + '.' + value;
    const s = t(key);
    return s === key ? value : s;
  }

  // ---------------------------------------------------------------- DOM

  function h(tag, attrs, ...children) {
    const el = document.createElement(tag);
    if (attrs) {
      for (const [k, v] of Object.entries(attrs)) {
        if (v === undefined || v === null || v === false) continue;
        if (k.startsWith('on') && typeof v === 'function') el.addEventListener(k.slice(2), v);
        else if (k === 'class') el.className = v;
        else if (k === 'value') el.value = v;
        else if (k === 'checked') el.checked = !!v;
        else if (k === 'selected') el.selected = !!v;
        else el.setAttribute(k, v === true ? '' : String(v));
      }
    }
    append(el, children);
    return el;
  }

  function append(el, ...children) {
    for (const c of children.flat(Infinity)) {
      if (c === undefined || c === null || c === false) continue;
      el.appendChild(c instanceof Node ? c : document.createTextNode(String(c)));
    }
    return el;
  }

  const SVG_NS = 'http://www.w3.org/2000/svg';
  function s(tag, attrs, ...children) {
    const el = document.createElementNS(SVG_NS, tag);
    for (const [k, v] of Object.entries(attrs || {})) el.setAttribute(k, String(v));
    for (const c of children.flat()) {
      if (c === undefined || c === null) continue;
      el.appendChild(c instanceof Node ? c : document.createTextNode(String(c)));
    }
    return el;
  }

  function clear(el) {
    while (el.firstChild) el.removeChild(el.firstChild);
    return el;
  }

  // ---------------------------------------------------------------- API

  class ApiError extends Error {
    constructor(status, message, field) {
      super(message);
      this.status = status;
      this.field = field;
    }
  }

  async function api(method, path, body) {
    const opts = { method, headers: { Accept: 'application/json' }, credentials: 'same-origin' };
    if (method !== 'GET') opts.headers['X-CSRF-Token'] = CSRF;
    if (body !== undefined) {
      opts.headers['Content-Type'] = 'application/json';
      opts.body = JSON.stringify(body);
    }
    let resp;
    try {
      resp = await fetch('/api/v1' + path, opts);
    } catch (e) {
      throw new ApiError(0, t('err.network'));
    }
    if (resp.status === 401) {
      location.href = '/console/login';
      throw new ApiError(401, t('err.session'));
    }
    const text = await resp.text();
    let data = null;
    if (text) {
      try {
        data = JSON.parse(text);
      } catch (e) {
        data = text;
      }
    }
    if (!resp.ok) {
      const err = data && data.error ? data.error : {};
      throw new ApiError(resp.status, refusalText(err) || resp.statusText || String(resp.status), err.field);
    }
    return data;
  }

  // A text the admin wrote as a code and values, in the console's language (key
  // '<prefix>.<code>', values filled in); null where the language has no such key (English:
  // the admin's own words are shown).
  function codedText(prefix, code, params) {
    const key = prefix + '.' + code;
    const dict = window.SL_I18N[lang];
    if (!code || !dict || dict[key] === undefined) return null;
    return t(key, params || {});
  }

  // An API error's message in the console's language (keys 'api.<code>'), with the field's API
  // name before it as the API puts it. A message without a code (a detail from elsewhere) is
  // shown as it came.
  function refusalText(err) {
    const text = codedText('api', err.code, err.params);
    if (text === null) return err.message;
    return err.field ? err.field + ': ' + text : text;
  }

  // A fire's or a run's message: the admin's own (with a note: code and values) in the console's
  // language (keys 'note.<code>'), an executor's words as they came.
  const noteText = (note, stored) => (note && codedText('note', note.code, note.params)) || stored || '';
  // A run's latest word: its result's message, else its trigger's.
  const runMessage = (r) => (r.handle_msg ? noteText(r.handle_note, r.handle_msg) : noteText(r.trigger_note, r.trigger_msg));
  const resultText = (r) => (r.handle_code ? r.handle_code + ' ' + noteText(r.handle_note, r.handle_msg) : '—');

  const get = (p) => api('GET', p);
  const post = (p, b) => api('POST', p, b === undefined ? {} : b);
  const put = (p, b) => api('PUT', p, b);
  const del = (p) => api('DELETE', p);

  function qs(params) {
    const parts = [];
    for (const [k, v] of Object.entries(params)) {
      if (v === undefined || v === null || v === '') continue;
      parts.push(encodeURIComponent(k) + '=' + encodeURIComponent(v));
    }
    return parts.length ? '?' + parts.join('&') : '';
  }

  // ---------------------------------------------------------------- formatting

  const fmtCache = {};
  function fmtTime(ms, tz) {
    if (ms === null || ms === undefined || ms === 0) return '—';
    const zone = tz || undefined;
    const key = zone || '';
    if (!fmtCache[key]) {
      try {
        fmtCache[key] = new Intl.DateTimeFormat('sv-SE', {
          timeZone: zone, year: 'numeric', month: '2-digit', day: '2-digit',
          hour: '2-digit', minute: '2-digit', second: '2-digit', hour12: false,
        });
      } catch (e) {
        fmtCache[key] = new Intl.DateTimeFormat('sv-SE', {
          year: 'numeric', month: '2-digit', day: '2-digit', hour: '2-digit', minute: '2-digit', second: '2-digit',
        });
      }
    }
    return fmtCache[key].format(new Date(ms));
  }

  function ago(ms) {
    if (!ms) return '—';
    const secs = Math.max(0, Math.round((Date.now() - ms) / 1000));
    if (secs < 60) return t('time.secondsAgo', { n: secs });
    if (secs < 3600) return t('time.minutesAgo', { n: Math.floor(secs / 60) });
    if (secs < 86400) return t('time.hoursAgo', { n: Math.floor(secs / 3600) });
    return t('time.daysAgo', { n: Math.floor(secs / 86400) });
  }

  function duration(from, to) {
    if (!from) return '—';
    const ms = (to || Date.now()) - from;
    if (ms < 1000) return ms + ' ms';
    if (ms < 60000) return (ms / 1000).toFixed(1) + ' s';
    const m = Math.floor(ms / 60000);
    return m + ' min ' + Math.round((ms % 60000) / 1000) + ' s';
  }

  function toLocalInput(ms) {
    if (!ms) return '';
    const d = new Date(ms - new Date(ms).getTimezoneOffset() * 60000);
    return d.toISOString().slice(0, 16);
  }

  function fromLocalInput(v) {
    if (!v) return undefined;
    const ms = new Date(v).getTime();
    return isNaN(ms) ? undefined : ms;
  }

  function stateBadge(state) {
    return h('span', { class: 'badge state-' + state, 'data-state': state }, enumLabel('state', state));
  }

  // ---------------------------------------------------------------- widgets

  function flash(message, kind) {
    const box = document.getElementById('flash');
    const item = h('div', { class: 'flash ' + (kind || 'ok'), role: kind === 'error' ? 'alert' : 'status' }, message);
    box.appendChild(item);
    setTimeout(() => item.remove(), kind === 'error' ? 8000 : 4000);
  }

  function errorBox(err) {
    if (err && err.status === 403) {
      return h('div', { class: 'notice error', id: 'forbidden', role: 'alert' },
        h('strong', null, t('err.forbidden')), ' ', err.message);
    }
    if (err && err.status === 404) {
      return h('div', { class: 'notice error', role: 'alert' }, h('strong', null, t('err.notFound')), ' ', err.message);
    }
    return h('div', { class: 'notice error', role: 'alert' }, (err && err.message) || String(err));
  }

  function empty(text, action) {
    return h('div', { class: 'empty' }, h('p', null, text), action || null);
  }

  // A table that scrolls sideways on a phone instead of squeezing its columns.
  function table(headers, rows, opts) {
    const o = opts || {};
    if (!rows.length) return empty(o.empty || t('common.none'), o.emptyAction);
    return h('div', { class: 'table-wrap' },
      h('table', { class: 'grid', id: o.id },
        h('thead', null, h('tr', null, headers.map((x) => h('th', null, x)))),
        h('tbody', null, rows.map((r) => h('tr', r.attrs || null, r.cells.map((c) => h('td', null, c)))))));
  }

  function pager(total, offset, limit, go) {
    if (total <= limit && offset === 0) return null;
    const page = Math.floor(offset / limit) + 1;
    const pages = Math.max(1, Math.ceil(total / limit));
    return h('div', { class: 'pager' },
      h('button', { type: 'button', disabled: offset === 0, onclick: () => go(Math.max(0, offset - limit)), id: 'page-prev' }, t('page.prev')),
      h('span', null, t('page.info', { page, pages, total })),
      h('button', { type: 'button', disabled: offset + limit >= total, onclick: () => go(offset + limit), id: 'page-next' }, t('page.next')));
  }

  // A modal dialog; resolves with the value of `collect()` when confirmed, or null.
  function dialog(title, body, okLabel, collect, danger) {
    return new Promise((resolve) => {
      const close = (v) => {
        back.remove();
        document.removeEventListener('keydown', onKey);
        resolve(v);
      };
      const onKey = (e) => {
        if (e.key === 'Escape') close(null);
      };
      const errorLine = h('p', { class: 'form-error', hidden: true });
      const ok = h('button', {
        type: 'submit', class: danger ? 'danger' : 'primary', id: 'dialog-ok',
      }, okLabel || t('common.ok'));
      const form = h('form', {
        class: 'dialog', role: 'dialog', 'aria-modal': 'true', 'aria-label': title,
        onsubmit: async (e) => {
          e.preventDefault();
          try {
            const v = collect ? await collect() : true;
            close(v);
          } catch (err) {
            errorLine.hidden = false;
            // A refused field is marked and named by its label, as on the forms.
            errorLine.textContent = showFieldError(form, err) || String(err);
          }
        },
      },
      h('h2', null, title), body, errorLine,
      h('div', { class: 'actions' },
        h('button', { type: 'button', id: 'dialog-cancel', onclick: () => close(null) }, t('common.cancel')), ok));
      const back = h('div', { class: 'backdrop' }, form);
      document.body.appendChild(back);
      document.addEventListener('keydown', onKey);
      const first = form.querySelector('input, textarea, select');
      (first || ok).focus();
    });
  }

  function confirmDialog(message, okLabel) {
    return dialog(t('common.confirm'), h('p', null, message), okLabel || t('common.ok'), null, true);
  }

  // Runs an action, shows its error as a message, and tells whether it worked.
  async function act(fn, okMessage) {
    try {
      const v = await fn();
      if (okMessage) flash(okMessage, 'ok');
      return v === undefined ? true : v;
    } catch (err) {
      flash(err.status === 403 ? t('err.forbidden') + ' ' + err.message : err.message, 'error');
      return false;
    }
  }

  function field(label, control, hint, id) {
    return h('label', { class: 'field', id: id ? 'field-' + id : null },
      h('span', { class: 'label' }, label), control, hint ? h('small', { class: 'hint' }, hint) : null);
  }

  function select(name, options, value, attrs) {
    return h('select', Object.assign({ name, id: 'f-' + name }, attrs || {}),
      options.map(([v, label]) => h('option', { value: v, selected: String(v) === String(value) }, label)));
  }

  function input(name, value, attrs) {
    return h('input', Object.assign({ name, id: 'f-' + name, value: value === undefined || value === null ? '' : value }, attrs || {}));
  }

  function link(href, text, attrs) {
    return h('a', Object.assign({ href }, attrs || {}), text);
  }

  // An API error's message, the field it names by its API name ("timezone: ...") named instead
  // by the label of the form's field `id`, in the console's language.
  function labelled(form, id, err) {
    const label = form.querySelector('#field-' + id + ' .label');
    const prefix = err.field + ': ';
    if (!label || !err.message.startsWith(prefix)) return err.message;
    return label.textContent + ': ' + err.message.slice(prefix.length);
  }

  // Marks the field an API error is about and returns the message to show.
  function showFieldError(form, err) {
    form.querySelectorAll('.invalid').forEach((f) => f.classList.remove('invalid'));
    const f = err.field ? form.querySelector('#field-' + err.field) : null;
    if (!f) return err.message;
    f.classList.add('invalid');
    const c = f.querySelector('input, select, textarea');
    if (c) c.focus();
    return labelled(form, err.field, err);
  }

  // ---------------------------------------------------------------- shared data

  let groupsCache = null;
  async function groups(force) {
    if (!groupsCache || force) groupsCache = await get('/groups');
    return groupsCache;
  }

  function groupName(list, id) {
    const g = list.find((x) => x.id === id);
    return g ? g.title + ' (' + g.appname + ')' : '#' + id;
  }

  const jobNameCache = {};
  async function jobNames(ids) {
    const missing = [...new Set(ids)].filter((id) => !(id in jobNameCache));
    await Promise.all(missing.map(async (id) => {
      try {
        jobNameCache[id] = (await get('/jobs/' + id)).name;
      } catch (e) {
        jobNameCache[id] = '#' + id;
      }
    }));
    return jobNameCache;
  }

  const RUN_STATES = ['triggering', 'running', 'succeeded', 'failed', 'timed_out', 'killed', 'lost'];
  const FIRE_STATES = ['triggering', 'running', 'succeeded', 'failed'];
  const ROUTES = ['FIRST', 'LAST', 'ROUND', 'RANDOM', 'CONSISTENT_HASH', 'LEAST_FREQUENTLY_USED', 'LEAST_RECENTLY_USED', 'FAILOVER', 'BUSYOVER', 'SHARDING_BROADCAST'];
  const BLOCKS = ['SERIAL_EXECUTION', 'DISCARD_LATER', 'COVER_EARLY'];
  const MISFIRES = ['DO_NOTHING', 'FIRE_ONCE_NOW'];
  const SCHEDULES = ['CRON', 'FIX_RATE', 'FIX_DELAY', 'NONE'];
  const MODES = ['NONE', 'BROADCAST', 'ITEMS'];
  const STRATEGIES = ['AVERAGE', 'ODEVITY', 'ROTATE', 'WEIGHTED', 'AFFINITY'];
  const GLUES = ['BEAN', 'GLUE_SHELL', 'GLUE_PYTHON', 'GLUE_PYTHON2', 'GLUE_NODEJS', 'GLUE_POWERSHELL', 'GLUE_PHP'];
  const ZONES = ['UTC', 'Asia/Shanghai', 'Asia/Hong_Kong', 'Asia/Tokyo', 'Asia/Singapore', 'Asia/Kolkata', 'Europe/London',
    'Europe/Berlin', 'Europe/Paris', 'America/New_York', 'America/Chicago', 'America/Los_Angeles', 'America/Sao_Paulo', 'Australia/Sydney'];

  const opts = (kind, values) => values.map((v) => [v, enumLabel(kind, v)]);

  // ---------------------------------------------------------------- dashboard

  function chart(days) {
    const W = 640, H = 220, L = 40, B = 28, T = 10, R = 10;
    const max = Math.max(1, ...days.map((d) => d.succeeded + d.failed + d.running));
    const step = (W - L - R) / days.length;
    const bw = Math.max(2, Math.min(36, step * 0.7));
    const y = (v) => T + (H - T - B) * (1 - v / max);
    const svg = s('svg', { viewBox: `0 0 ${W} ${H}`, class: 'chart', role: 'img', id: 'runs-chart', 'aria-label': t('dash.chart') });
    const ticks = max <= 4 ? max : 4;
    for (let i = 0; i <= ticks; i++) {
      const v = Math.round((max * i) / ticks);
      svg.appendChild(s('line', { x1: L, x2: W - R, y1: y(v), y2: y(v), class: 'gridline' }));
      svg.appendChild(s('text', { x: L - 6, y: y(v) + 4, 'text-anchor': 'end', class: 'axis' }, String(v)));
    }
    const every = Math.ceil(days.length / 10);
    days.forEach((d, i) => {
      const x = L + i * step + (step - bw) / 2;
      let base = 0;
      for (const [k, cls] of [['succeeded', 'bar-ok'], ['failed', 'bar-fail'], ['running', 'bar-run']]) {
        const v = d[k];
        if (v > 0) {
          const rect = s('rect', { x, y: y(base + v), width: bw, height: Math.max(1, y(base) - y(base + v)), class: cls });
          rect.appendChild(s('title', null, `${d.day} · ${t('state.' + k)}: ${v}`));
          svg.appendChild(rect);
        }
        base += v;
      }
      if (i % every === 0 || i === days.length - 1) {
        svg.appendChild(s('text', { x: x + bw / 2, y: H - 8, 'text-anchor': 'middle', class: 'axis' }, d.day.slice(5)));
      }
    });
    return h('figure', { class: 'chart-box' }, svg,
      h('figcaption', { class: 'legend' },
        h('span', { class: 'key bar-ok' }), t('state.succeeded'),
        h('span', { class: 'key bar-fail' }), t('state.failed'),
        h('span', { class: 'key bar-run' }), t('state.running')));
  }

  async function dashboardPage(root, params, query) {
    const days = query.days === '30' ? 30 : 7;
    const d = await get('/dashboard' + qs({ days }));
    const card = (label, value, sub, id) => h('div', { class: 'card', id },
      h('div', { class: 'card-value' }, String(value)), h('div', { class: 'card-label' }, label), sub ? h('div', { class: 'card-sub' }, sub) : null);
    const runLine = (r) => ({
      cells: [
        link('#/runs/' + r.id, '#' + r.id),
        link('#/jobs/' + r.job_id, r.job_name || '#' + r.job_id),
        r.shard_index + '/' + r.shard_total,
        r.executor_address || '—',
        stateBadge(r.state),
        ago(r.dispatched_at || r.created_at),
      ],
    });
    const failLine = (r) => ({
      cells: [
        link('#/runs/' + r.id, '#' + r.id),
        link('#/jobs/' + r.job_id, r.job_name || '#' + r.job_id),
        link('#/fires/' + r.fire_id, '#' + r.fire_id),
        stateBadge(r.state),
        h('span', { class: 'msg' }, runMessage(r).slice(0, 160)),
        fmtTime(r.finished_at || r.created_at),
      ],
    });
    append(root,
      h('div', { class: 'page-head' }, h('h1', null, t('nav.dashboard'))),
      h('div', { class: 'cards' },
        card(t('dash.jobs'), d.jobs, t('dash.enabled', { n: d.jobs_enabled }), 'card-jobs'),
        card(t('dash.executors'), d.executors_online, t('dash.groups', { n: d.groups }), 'card-executors'),
        card(t('dash.firesToday'), d.fires_today, null, 'card-fires'),
        card(t('dash.runsToday'), d.runs_today.succeeded + d.runs_today.failed + d.runs_today.running,
          t('dash.okFail', { ok: d.runs_today.succeeded, fail: d.runs_today.failed }), 'card-runs')),
      h('section', { class: 'panel' },
        h('div', { class: 'panel-head' }, h('h2', null, t('dash.chart')),
          h('div', { class: 'seg' },
            link('#/?days=7', t('dash.days', { n: 7 }), { class: days === 7 ? 'on' : '' }),
            link('#/?days=30', t('dash.days', { n: 30 }), { class: days === 30 ? 'on' : '' }))),
        chart(d.days),
        h('p', { class: 'hint' }, t('dash.tz', { tz: d.timezone }))),
      h('section', { class: 'panel' }, h('h2', null, t('dash.running')),
        table([t('col.run'), t('col.job'), t('col.item'), t('col.executor'), t('col.state'), t('col.since')],
          d.running.map(runLine), { empty: t('dash.noneRunning'), id: 'running-table' })),
      h('section', { class: 'panel' }, h('h2', null, t('dash.failures')),
        table([t('col.run'), t('col.job'), t('col.fire'), t('col.state'), t('col.message'), t('col.time')],
          d.recent_failures.map(failLine), { empty: t('dash.noFailures'), id: 'failures-table' })));
  }

  // ---------------------------------------------------------------- groups

  async function groupsPage(root) {
    const list = await groups(true);
    const counts = await Promise.all(list.map((g) => get('/groups/' + g.id + '/executors').then((e) => e.length, () => '—')));
    let nodes = [];
    try {
      nodes = await get('/nodes');
    } catch (e) {
      nodes = [];
    }
    append(root,
      h('div', { class: 'page-head' }, h('h1', null, t('nav.groups')),
        IS_ADMIN ? link('#/groups/new', t('group.new'), { class: 'button primary', id: 'new-group' }) : null),
      table([t('col.appname'), t('col.title'), t('col.addressType'), t('col.online'), ''],
        list.map((g, i) => ({
          attrs: { 'data-appname': g.appname },
          cells: [link('#/groups/' + g.id, g.appname), g.title, enumLabel('addr', g.address_type), String(counts[i]),
            link('#/jobs?group_id=' + g.id, t('group.jobs'))],
        })),
        {
          id: 'groups-table',
          empty: IS_ADMIN ? t('group.emptyAdmin') : t('group.emptyUser'),
          emptyAction: IS_ADMIN ? link('#/groups/new', t('group.new'), { class: 'button primary' }) : null,
        }),
      h('section', { class: 'panel' }, h('h2', null, t('nodes.title')),
        table([t('col.node'), t('col.address'), t('col.started'), t('col.lastBeat')],
          nodes.map((n) => ({ cells: [n.id, n.address, fmtTime(n.started_at), ago(n.heartbeat_at)] })),
          { empty: t('nodes.none'), id: 'nodes-table' })));
  }

  function groupForm(g, onSaved) {
    const isNew = !g.id;
    const ro = !IS_ADMIN;
    const form = h('form', { class: 'form', id: 'group-form' },
      h('div', { class: 'form-grid' },
        field(t('group.appname'), input('appname', g.appname, { required: true, maxlength: 64, disabled: ro, pattern: '[A-Za-z0-9_.\\-]+' }), t('group.appnameHint'), 'appname'),
        field(t('group.title'), input('title', g.title, { maxlength: 128, disabled: ro }), null, 'title'),
        field(t('group.addressType'), select('address_type', opts('addr', ['AUTO', 'MANUAL']), g.address_type || 'AUTO', { disabled: ro }), t('group.addressTypeHint'), 'address_type'),
        field(t('group.generation'), select('generation', [['CLASSIC', t('gen.CLASSIC')], ['V35', t('gen.V35')]], g.generation || 'CLASSIC', { disabled: ro }), null, 'generation'),
        field(t('group.addresses'), h('textarea', { name: 'addresses', id: 'f-addresses', rows: 3, disabled: ro, placeholder: 'http://10.0.0.7:9999/' }, (g.addresses || []).join('\n')), t('group.addressesHint'), 'addresses'),
        IS_ADMIN ? field(t('group.token'), input('access_token', g.access_token || '', { autocomplete: 'off', maxlength: 256 }), t('group.tokenHint'), 'access_token') : null),
      IS_ADMIN ? h('div', { class: 'actions' }, h('button', { type: 'submit', class: 'primary', id: 'group-save' }, isNew ? t('common.create') : t('common.save'))) : null);
    form.addEventListener('submit', async (e) => {
      e.preventDefault();
      const fd = new FormData(form);
      const body = {
        appname: fd.get('appname').trim(),
        title: fd.get('title').trim() || undefined,
        address_type: fd.get('address_type'),
        generation: fd.get('generation'),
        addresses: String(fd.get('addresses') || '').split(/[\n,]/).map((x) => x.trim()).filter(Boolean),
        access_token: fd.get('access_token'),
      };
      try {
        const saved = isNew ? await post('/groups', body) : await put('/groups/' + g.id, body);
        groupsCache = null;
        flash(t('common.saved'));
        onSaved(saved);
      } catch (err) {
        flash(showFieldError(form, err), 'error');
      }
    });
    return form;
  }

  async function groupNewPage(root) {
    append(root, h('div', { class: 'page-head' }, h('h1', null, t('group.new'))),
      groupForm({ address_type: 'AUTO' }, (g) => { location.hash = '#/groups/' + g.id; }));
  }

  async function groupPage(root, params) {
    const id = params[0];
    const g = await get('/groups/' + id);
    const execs = await get('/groups/' + id + '/executors');
    const remove = async () => {
      if (!(await confirmDialog(t('group.deleteConfirm', { name: g.appname }), t('common.delete')))) return;
      if (await act(() => del('/groups/' + id), t('common.deleted'))) {
        groupsCache = null;
        location.hash = '#/groups';
      }
    };
    append(root,
      h('div', { class: 'page-head' }, h('h1', null, g.title, ' ', h('small', null, g.appname)),
        h('div', { class: 'actions' },
          link('#/jobs?group_id=' + id, t('group.jobs'), { class: 'button' }),
          IS_ADMIN ? h('button', { type: 'button', class: 'danger', onclick: remove, id: 'group-delete' }, t('common.delete')) : null)),
      h('section', { class: 'panel' }, h('h2', null, t('group.executors')),
        table([t('col.address'), t('col.lastBeat'), t('col.firstSeen'), t('col.weight'), t('col.labels')],
          execs.map((e) => ({
            cells: [e.address, e.last_beat_at ? ago(e.last_beat_at) : t('group.manual'), fmtTime(e.first_seen), String(e.weight),
              e.labels.length ? e.labels.map((l) => h('span', { class: 'tag' }, l)) : '—'],
          })),
          { empty: t('group.noExecutors', { appname: g.appname }), id: 'executors-table' })),
      h('section', { class: 'panel' }, h('h2', null, IS_ADMIN ? t('group.edit') : t('group.settings')),
        groupForm(g, () => route())));
  }

  // ---------------------------------------------------------------- jobs

  function scheduleText(j) {
    if (j.schedule_type === 'NONE') return enumLabel('sched', 'NONE');
    if (j.schedule_type === 'CRON') return j.schedule_conf;
    return enumLabel('sched', j.schedule_type) + ' ' + j.schedule_conf + ' s';
  }

  async function jobsPage(root, params, query) {
    const list = await groups();
    const offset = Number(query.offset || 0);
    const filter = { group_id: query.group_id || '', name: query.name || '', handler: query.handler || '', enabled: query.enabled || '' };
    const page = await get('/jobs' + qs(Object.assign({}, filter, { offset, limit: PAGE })));
    const go = (f) => { location.hash = '#/jobs' + qs(f); };
    const form = h('form', { class: 'filters', id: 'job-filters' },
      select('group_id', [['', t('filter.allGroups')], ...list.map((g) => [g.id, g.title + ' (' + g.appname + ')'])], filter.group_id),
      input('name', filter.name, { placeholder: t('job.name'), type: 'search' }),
      input('handler', filter.handler, { placeholder: t('job.handler'), type: 'search' }),
      select('enabled', [['', t('filter.anyStatus')], ['true', t('job.on')], ['false', t('job.off')]], filter.enabled),
      h('button', { type: 'submit' }, t('common.search')));
    form.addEventListener('submit', (e) => {
      e.preventDefault();
      const fd = new FormData(form);
      go({ group_id: fd.get('group_id'), name: fd.get('name').trim(), handler: fd.get('handler').trim(), enabled: fd.get('enabled') });
    });
    const toggle = async (j) => {
      const ok = await act(() => post('/jobs/' + j.id + (j.enabled ? '/stop' : '/start')), j.enabled ? t('job.stopped') : t('job.started'));
      if (ok) route();
    };
    let emptyText = t('job.empty');
    let emptyAction = link('#/jobs/new', t('job.new'), { class: 'button primary' });
    if (!list.length) {
      emptyText = IS_ADMIN ? t('job.noGroupsAdmin') : t('job.noGroupsUser');
      emptyAction = IS_ADMIN ? link('#/groups/new', t('group.new'), { class: 'button primary' }) : null;
    }
    append(root,
      h('div', { class: 'page-head' }, h('h1', null, t('nav.jobs')),
        list.length ? link('#/jobs/new' + qs({ group_id: filter.group_id }), t('job.new'), { class: 'button primary', id: 'new-job' }) : null),
      form,
      table([t('col.id'), t('col.name'), t('col.group'), t('col.schedule'), t('col.handler'), t('col.mode'), t('col.status'), t('col.nextFire'), ''],
        page.items.map((j) => ({
          attrs: { 'data-job': j.name },
          cells: [String(j.id), link('#/jobs/' + j.id, j.name), groupName(list, j.group_id), h('code', null, scheduleText(j)),
            j.glue_type === 'BEAN' ? j.handler : enumLabel('glue', j.glue_type), enumLabel('mode', j.sharding_mode),
            h('span', { class: 'badge ' + (j.enabled ? 'on' : 'off') }, j.enabled ? t('job.on') : t('job.off')),
            fmtTime(j.next_fire_at, j.timezone || BOOT.timezone),
            h('span', { class: 'row-actions' },
              j.schedule_type !== 'NONE' ? h('button', { type: 'button', class: 'small', onclick: () => toggle(j) }, j.enabled ? t('job.stop') : t('job.start')) : null,
              h('button', { type: 'button', class: 'small', onclick: () => runOnce(j) }, t('job.runOnce')))],
        })),
        { id: 'jobs-table', empty: emptyText, emptyAction }),
      pager(page.total, offset, PAGE, (o) => go(Object.assign({}, filter, { offset: o }))));
  }

  // The "run once" dialog: parameters and, optionally, the executors to run on.
  async function runOnce(job) {
    let execs = [];
    try {
      execs = await get('/groups/' + job.group_id + '/executors');
    } catch (e) {
      execs = [];
    }
    const params = h('textarea', { name: 'params', id: 'run-params', rows: 3 }, job.params || '');
    const boxes = execs.map((e) => h('label', { class: 'check' }, h('input', { type: 'checkbox', value: e.address, class: 'run-executor' }), ' ', e.address));
    const body = h('div', null,
      field(t('job.params'), params, t('job.runParamsHint')),
      h('fieldset', null, h('legend', null, t('job.runExecutors')),
        boxes.length ? boxes : h('p', { class: 'hint' }, t('job.noExecutorsOnline')),
        h('small', { class: 'hint' }, t('job.runExecutorsHint'))));
    const res = await dialog(t('job.runOnceTitle', { name: job.name }), body, t('job.run'), async () => {
      const addresses = boxes.map((b) => b.querySelector('input')).filter((i) => i.checked).map((i) => i.value);
      const req = { params: params.value };
      if (addresses.length) req.addresses = addresses;
      return post('/jobs/' + job.id + '/trigger', req);
    });
    if (res) {
      flash(t('job.triggered', { id: res.fire_id }));
      location.hash = '#/fires/' + res.fire_id;
    }
  }

  function cronHelper(form) {
    const leave = onLeave();
    const box = h('div', { class: 'cron-helper', id: 'cron-helper', 'aria-live': 'polite' });
    let timer = null;
    let seq = 0;
    const update = () => {
      clearTimeout(timer);
      timer = setTimeout(async () => {
        const type = form.querySelector('[name=schedule_type]').value;
        const expr = form.querySelector('[name=schedule_conf]').value.trim();
        const tz = form.querySelector('[name=timezone]').value.trim() || BOOT.timezone;
        clear(box);
        if (type !== 'CRON') {
          box.hidden = true;
          return;
        }
        box.hidden = false;
        if (!expr) {
          box.appendChild(h('p', { class: 'hint' }, t('cron.enter')));
          return;
        }
        const mine = ++seq;
        try {
          const r = await get('/cron/next' + qs({ expr, tz, count: 5, lang }));
          if (mine !== seq) return;
          clear(box);
          box.classList.remove('bad');
          append(box,
            h('p', { class: 'cron-desc', id: 'cron-desc' }, r.description),
            h('p', { class: 'hint' }, t('cron.next', { tz: r.timezone })),
            r.times.length ? h('ol', { class: 'cron-times', id: 'cron-times' }, r.times.map((ms) => h('li', null, fmtTime(ms, r.timezone))))
              : h('p', { class: 'warn' }, t('cron.never')),
            (r.warnings || []).map((w) => h('p', { class: 'warn cron-warning' }, w)));
        } catch (err) {
          if (mine !== seq) return;
          clear(box);
          box.classList.add('bad');
          // The preview's parameters are the form's schedule and time zone.
          const id = err.field === 'expr' ? 'schedule_conf' : err.field === 'tz' ? 'timezone' : null;
          const message = id ? labelled(form, id, err) : err.message;
          box.appendChild(h('p', { class: 'form-error', id: 'cron-error' }, message));
        }
      }, 250);
    };
    for (const n of ['schedule_type', 'schedule_conf', 'timezone']) {
      const el = form.querySelector('[name=' + n + ']');
      el.addEventListener('input', update);
      el.addEventListener('change', update);
    }
    leave(() => clearTimeout(timer));
    update();
    return box;
  }

  function jobForm(j, list, onSaved) {
    const isNew = !j.id;
    const num = (name, value, attrs) => input(name, value, Object.assign({ type: 'number', step: 1 }, attrs || {}));
    const groupOpts = list.map((g) => [g.id, g.title + ' (' + g.appname + ')']);
    const form = h('form', { class: 'form', id: 'job-form', novalidate: true });
    const sec = (title, ...fields) => h('fieldset', { class: 'form-section' }, h('legend', null, title), h('div', { class: 'form-grid' }, fields));
    append(form,
      sec(t('job.basics'),
        field(t('job.group'), select('group_id', groupOpts, j.group_id), null, 'group_id'),
        field(t('job.name'), input('name', j.name, { required: true, maxlength: 255 }), null, 'name'),
        field(t('job.description'), input('description', j.description), null, 'description'),
        field(t('job.alarm'), input('alarm_targets', j.alarm_targets, { placeholder: 'ops@example.com, https://hooks…' }), t('job.alarmHint'), 'alarm_targets')),
      sec(t('job.schedule'),
        field(t('job.scheduleType'), select('schedule_type', opts('sched', SCHEDULES), j.schedule_type), null, 'schedule_type'),
        field(t('job.scheduleConf'), input('schedule_conf', j.schedule_conf, { placeholder: '0 0/5 * * * ?', autocomplete: 'off', spellcheck: 'false' }), t('job.scheduleConfHint'), 'schedule_conf'),
        field(t('job.timezone'), input('timezone', j.timezone, { list: 'zones', placeholder: BOOT.timezone }), t('job.timezoneHint', { tz: BOOT.timezone }), 'timezone'),
        field(t('job.misfire'), select('misfire_strategy', opts('misfire', MISFIRES), j.misfire_strategy), null, 'misfire_strategy'),
        h('datalist', { id: 'zones' }, ZONES.map((z) => h('option', { value: z })))),
      sec(t('job.execution'),
        field(t('job.glueType'), select('glue_type', opts('glue', GLUES), j.glue_type), null, 'glue_type'),
        field(t('job.handler'), input('handler', j.handler, { placeholder: 'demoJobHandler' }), t('job.handlerHint'), 'handler'),
        field(t('job.params'), h('textarea', { name: 'params', id: 'f-params', rows: 2 }, j.params || ''), t('job.paramsHint'), 'params'),
        field(t('job.route'), select('route_strategy', opts('route', ROUTES), j.route_strategy), null, 'route_strategy'),
        field(t('job.block'), select('block_strategy', opts('block', BLOCKS), j.block_strategy), null, 'block_strategy'),
        field(t('job.timeout'), num('timeout_s', j.timeout_s, { min: 0 }), t('job.timeoutHint'), 'timeout_s'),
        field(t('job.retryCount'), num('retry_count', j.retry_count, { min: 0, max: 100 }), null, 'retry_count'),
        field(t('job.retryInterval'), num('retry_interval_s', j.retry_interval_s, { min: 0 }), null, 'retry_interval_s'),
        field(t('job.retryBackoff'), num('retry_backoff', j.retry_backoff, { min: 1, max: 10 }), t('job.retryBackoffHint'), 'retry_backoff'),
        field(t('job.children'), input('child_job_ids', (j.child_job_id_list || []).join(','), { placeholder: '12,13' }), t('job.childrenHint'), 'child_job_ids')),
      sec(t('job.sharding'),
        field(t('job.mode'), select('sharding_mode', opts('mode', MODES), j.sharding_mode), t('job.modeHint'), 'sharding_mode'),
        field(t('job.total'), num('sharding_total', j.sharding_total, { min: 1 }), t('job.totalHint'), 'sharding_total'),
        field(t('job.strategy'), select('sharding_strategy', opts('strategy', STRATEGIES), j.sharding_strategy), null, 'sharding_strategy'),
        field(t('job.itemParams'), input('item_params', j.item_params, { placeholder: '0=shanghai,1=beijing' }), t('job.itemParamsHint'), 'item_params'),
        field(t('job.maxNode'), num('max_node', j.max_node, { min: 0 }), t('job.maxNodeHint'), 'max_node'),
        h('label', { class: 'field check', id: 'field-resume_checkpoint' }, h('input', { type: 'checkbox', name: 'resume_checkpoint', checked: !!j.resume_checkpoint }), ' ', t('job.resume'))));
    const glueField = field(t('job.glueSource'), h('textarea', { name: 'glue_source', id: 'f-glue_source', rows: 8, class: 'code', spellcheck: 'false' }, j.glue_source || ''), isNew ? null : t('job.glueEditHint'), 'glue_source');
    form.querySelector('.form-section:nth-of-type(3) .form-grid').appendChild(glueField);
    append(form,
      h('label', { class: 'field check', id: 'field-enabled' }, h('input', { type: 'checkbox', name: 'enabled', id: 'f-enabled', checked: !!j.enabled }), ' ', t('job.enabled')),
      h('div', { class: 'actions' }, h('button', { type: 'submit', class: 'primary', id: 'job-save' }, isNew ? t('common.create') : t('common.save'))));
    // The cron helper sits under the schedule fields.
    form.querySelector('.form-section:nth-of-type(2)').appendChild(cronHelper(form));

    const sync = () => {
      const glue = form.querySelector('[name=glue_type]').value;
      const mode = form.querySelector('[name=sharding_mode]').value;
      form.querySelector('#field-handler').hidden = glue !== 'BEAN';
      glueField.hidden = glue === 'BEAN' || !isNew;
      for (const n of ['sharding_total', 'sharding_strategy', 'item_params']) form.querySelector('#field-' + n).hidden = mode !== 'ITEMS';
      form.querySelector('#field-max_node').hidden = mode === 'NONE';
      form.querySelector('#field-schedule_conf').hidden = form.querySelector('[name=schedule_type]').value === 'NONE';
    };
    form.addEventListener('change', sync);
    sync();

    const collect = () => {
      const fd = new FormData(form);
      const n = (k) => {
        const v = String(fd.get(k) || '').trim();
        return v === '' ? 0 : Number(v);
      };
      const body = {
        group_id: Number(fd.get('group_id')), name: fd.get('name').trim(), description: fd.get('description'),
        schedule_type: fd.get('schedule_type'), schedule_conf: fd.get('schedule_conf').trim(), timezone: fd.get('timezone').trim(),
        misfire_strategy: fd.get('misfire_strategy'), glue_type: fd.get('glue_type'), handler: fd.get('handler').trim(),
        params: fd.get('params'), route_strategy: fd.get('route_strategy'), block_strategy: fd.get('block_strategy'),
        timeout_s: n('timeout_s'), retry_count: n('retry_count'), retry_interval_s: n('retry_interval_s'), retry_backoff: n('retry_backoff') || 1,
        child_job_ids: String(fd.get('child_job_ids') || '').trim(), sharding_mode: fd.get('sharding_mode'),
        sharding_total: n('sharding_total') || 1, sharding_strategy: fd.get('sharding_strategy'),
        item_params: fd.get('sharding_mode') === 'ITEMS' ? fd.get('item_params').trim() : '',
        max_node: n('max_node'), resume_checkpoint: fd.get('resume_checkpoint') !== null,
        alarm_targets: fd.get('alarm_targets').trim(), enabled: fd.get('enabled') !== null,
      };
      if (isNew && body.glue_type !== 'BEAN') body.glue_source = fd.get('glue_source');
      return body;
    };
    form.addEventListener('submit', async (e) => {
      e.preventDefault();
      const body = collect();
      try {
        let saved;
        if (isNew) {
          saved = await post('/jobs', body);
        } else {
          try {
            saved = await put('/jobs/' + j.id, body);
          } catch (err) {
            // Changing N of a job with checkpoints needs an explicit "yes, reset them".
            if (err.status !== 409 || !/reset_checkpoints/.test(err.message)) throw err;
            if (!(await confirmDialog(err.message, t('job.resetCheckpoints')))) return;
            body.reset_checkpoints = true;
            saved = await put('/jobs/' + j.id, body);
          }
        }
        flash(t('common.saved'));
        onSaved(saved);
      } catch (err) {
        flash(showFieldError(form, err), 'error');
      }
    });
    return form;
  }

  const NEW_JOB = {
    name: '', description: '', schedule_type: 'CRON', schedule_conf: '', timezone: '', handler: '', params: '',
    route_strategy: 'FIRST', block_strategy: 'SERIAL_EXECUTION', timeout_s: 0, retry_count: 0, retry_interval_s: 0,
    retry_backoff: 1, misfire_strategy: 'DO_NOTHING', sharding_mode: 'NONE', sharding_total: 1, sharding_strategy: 'AVERAGE',
    item_params: '', max_node: 0, resume_checkpoint: 0, child_job_id_list: [], glue_type: 'BEAN', glue_source: '',
    alarm_targets: '', enabled: 0,
  };

  async function jobNewPage(root, params, query) {
    const list = await groups(true);
    if (!list.length) {
      append(root, h('h1', null, t('job.new')), empty(IS_ADMIN ? t('job.noGroupsAdmin') : t('job.noGroupsUser'),
        IS_ADMIN ? link('#/groups/new', t('group.new'), { class: 'button primary' }) : null));
      return;
    }
    const j = Object.assign({}, NEW_JOB, { group_id: Number(query.group_id) || list[0].id });
    append(root, h('div', { class: 'page-head' }, h('h1', null, t('job.new'))),
      jobForm(j, list, (saved) => { location.hash = '#/jobs/' + saved.id; }));
  }

  async function jobPage(root, params) {
    const id = params[0];
    const [j, list] = await Promise.all([get('/jobs/' + id), groups()]);
    const tz = j.timezone || BOOT.timezone;
    let next = [];
    try {
      next = (await get('/jobs/' + id + '/next?count=5')).times;
    } catch (e) {
      next = [];
    }
    const toggle = async () => {
      if (await act(() => post('/jobs/' + id + (j.enabled ? '/stop' : '/start')), j.enabled ? t('job.stopped') : t('job.started'))) route();
    };
    const remove = async () => {
      if (!(await confirmDialog(t('job.deleteConfirm', { name: j.name }), t('common.delete')))) return;
      if (await act(() => del('/jobs/' + id), t('common.deleted'))) location.hash = '#/jobs';
    };
    append(root,
      h('div', { class: 'page-head' },
        h('h1', null, j.name, ' ', h('span', { class: 'badge ' + (j.enabled ? 'on' : 'off'), id: 'job-status' }, j.enabled ? t('job.on') : t('job.off'))),
        h('div', { class: 'actions' },
          j.schedule_type !== 'NONE' ? h('button', { type: 'button', onclick: toggle, id: 'job-toggle' }, j.enabled ? t('job.stop') : t('job.start')) : null,
          h('button', { type: 'button', class: 'primary', onclick: () => runOnce(j), id: 'job-run' }, t('job.runOnce')),
          j.glue_type !== 'BEAN' ? link('#/jobs/' + id + '/glue', t('job.glueEditor'), { class: 'button', id: 'job-glue' }) : null,
          link('#/fires?job_id=' + id, t('nav.fires'), { class: 'button' }),
          link('#/runs?job_id=' + id, t('nav.runs'), { class: 'button' }),
          h('button', { type: 'button', class: 'danger', onclick: remove, id: 'job-delete' }, t('common.delete')))),
      h('p', { class: 'sub' }, groupName(list, j.group_id), ' · ', h('code', null, scheduleText(j)), ' · ', enumLabel('mode', j.sharding_mode)),
      h('section', { class: 'panel' }, h('h2', null, t('job.nextFires', { tz })),
        next.length ? h('ol', { class: 'cron-times', id: 'job-next' }, next.map((ms) => h('li', null, fmtTime(ms, tz)))) : empty(t('job.noNext'))),
      j.sharding_mode === 'ITEMS' ? await assignmentPanel(id) : null,
      j.sharding_mode !== 'NONE' ? await checkpointPanel(id) : null,
      h('section', { class: 'panel' }, h('h2', null, t('job.edit')), jobForm(j, list, () => route())));
  }

  // Saved progress per item; a retry or takeover (and, with "resume", the next fire) starts there.
  async function checkpointPanel(id) {
    try {
      const cps = await get('/jobs/' + id + '/checkpoints');
      const clear = async () => {
        if (!(await confirmDialog(t('job.checkpointsClearConfirm'), t('job.checkpointsClear')))) return;
        if (await act(() => del('/jobs/' + id + '/checkpoints'), t('job.checkpointsCleared'))) route();
      };
      return h('section', { class: 'panel', id: 'checkpoints' },
        h('div', { class: 'page-head' }, h('h2', null, t('job.checkpoints')),
          cps.length ? h('button', { type: 'button', class: 'danger', onclick: clear, id: 'checkpoints-clear' }, t('job.checkpointsClear')) : null),
        table([t('col.item'), t('job.checkpointValue'), t('col.run'), t('col.time')],
          cps.map((c) => ({ cells: [String(c.item), h('code', null, c.value), link('#/runs/' + c.run_id, '#' + c.run_id), fmtTime(c.updated_at)] })),
          { empty: t('job.noCheckpoints') }));
    } catch (err) {
      return h('section', { class: 'panel' }, h('h2', null, t('job.checkpoints')), errorBox(err));
    }
  }

  async function assignmentPanel(id) {
    try {
      const a = await get('/jobs/' + id + '/assignment');
      return h('section', { class: 'panel', id: 'assignment' }, h('h2', null, t('job.assignment', { strategy: a.strategy, n: a.sharding_total })),
        table([t('col.executor'), t('col.items')], a.executors.map((e) => ({ cells: [e.address, e.items.join(', ') || '—'] })),
          { empty: t('job.noExecutorsOnline') }));
    } catch (err) {
      return h('section', { class: 'panel' }, h('h2', null, t('job.assignmentTitle')), errorBox(err));
    }
  }

  // ---------------------------------------------------------------- GLUE

  // Line diff by longest common subsequence; fine for scripts of a few thousand lines.
  function diffLines(a, b) {
    const A = a.split('\n'), B = b.split('\n');
    const n = A.length, m = B.length;
    if (n * m > 9e6) return null;
    const w = m + 1;
    const L = new Uint32Array((n + 1) * w);
    for (let i = n - 1; i >= 0; i--) {
      for (let j = m - 1; j >= 0; j--) {
        L[i * w + j] = A[i] === B[j] ? L[(i + 1) * w + j + 1] + 1 : Math.max(L[(i + 1) * w + j], L[i * w + j + 1]);
      }
    }
    const out = [];
    let i = 0, j = 0;
    while (i < n && j < m) {
      if (A[i] === B[j]) { out.push([' ', A[i]]); i++; j++; }
      else if (L[(i + 1) * w + j] >= L[i * w + j + 1]) { out.push(['-', A[i]]); i++; }
      else { out.push(['+', B[j]]); j++; }
    }
    while (i < n) out.push(['-', A[i++]]);
    while (j < m) out.push(['+', B[j++]]);
    return out;
  }

  function diffView(a, b, labelA, labelB) {
    const d = diffLines(a, b);
    if (!d) return h('p', { class: 'warn' }, t('glue.tooBig'));
    const changed = d.some(([k]) => k !== ' ');
    return h('div', { class: 'diff', id: 'glue-diff' },
      h('p', { class: 'hint' }, h('span', { class: 'del' }, '− ' + labelA), '  ', h('span', { class: 'add' }, '+ ' + labelB)),
      changed ? h('pre', null, d.map(([k, line]) => h('div', { class: k === '+' ? 'add' : k === '-' ? 'del' : 'same' }, k + ' ' + line)))
        : h('p', null, t('glue.same')));
  }

  async function gluePage(root, params) {
    const id = params[0];
    const [j, versions] = await Promise.all([get('/jobs/' + id), get('/jobs/' + id + '/glue')]);
    const editor = h('textarea', { class: 'code editor', id: 'glue-editor', rows: 22, spellcheck: 'false' }, j.glue_source || '');
    editor.addEventListener('keydown', (e) => {
      if (e.key === 'Tab') {
        e.preventDefault();
        const st = editor.selectionStart;
        editor.setRangeText('\t', st, editor.selectionEnd, 'end');
      }
    });
    const remark = input('glue_remark', '', { placeholder: t('glue.remarkHint'), maxlength: 100 });
    const diffBox = h('div', { id: 'diff-box' });
    const save = async () => {
      if (await act(() => put('/jobs/' + id, { glue_source: editor.value, glue_remark: remark.value.trim() || t('glue.defaultRemark') }), t('common.saved'))) route();
    };
    const pick = (name) => {
      const el = root.querySelector('input[name=' + name + ']:checked');
      if (!el) return null;
      return el.value === 'editor' ? { label: t('glue.editor'), src: editor.value } : (() => {
        const v = versions.find((x) => String(x.id) === el.value);
        return { label: t('glue.version', { id: v.id }), src: v.glue_source };
      })();
    };
    const compare = () => {
      const a = pick('diff-a'), b = pick('diff-b');
      clear(diffBox);
      if (!a || !b) {
        diffBox.appendChild(h('p', { class: 'warn' }, t('glue.pickTwo')));
        return;
      }
      diffBox.appendChild(diffView(a.src, b.src, a.label, b.label));
    };
    // By default: A = the newest saved version, B = what is in the editor.
    const radios = (v, a, b) => [
      h('input', { type: 'radio', name: 'diff-a', value: v, checked: a, 'aria-label': 'A' }),
      h('input', { type: 'radio', name: 'diff-b', value: v, checked: b, 'aria-label': 'B' }),
    ];
    append(root,
      h('div', { class: 'page-head' }, h('h1', null, t('glue.title', { name: j.name }), ' ', h('small', null, enumLabel('glue', j.glue_type))),
        link('#/jobs/' + id, t('common.back'), { class: 'button' })),
      h('section', { class: 'panel' }, editor,
        h('div', { class: 'actions' }, remark, h('button', { type: 'button', class: 'primary', onclick: save, id: 'glue-save' }, t('common.save')))),
      h('section', { class: 'panel' }, h('h2', null, t('glue.history')),
        table(['A', 'B', t('col.version'), t('col.remark'), t('col.time'), ''],
          [{ cells: [...radios('editor', false, true), t('glue.editor'), '', '', ''] }]
            .concat(versions.map((v, i) => ({
              cells: [...radios(String(v.id), i === 0, false), '#' + v.id, v.remark, fmtTime(v.created_at),
                h('button', { type: 'button', class: 'small', onclick: () => { editor.value = v.glue_source; flash(t('glue.loaded', { id: v.id })); } }, t('glue.load'))],
            }))),
          { id: 'glue-history' }),
        h('div', { class: 'actions' }, h('button', { type: 'button', onclick: compare, id: 'glue-compare' }, t('glue.compare'))),
        diffBox));
  }

  // ---------------------------------------------------------------- fires

  async function jobFilterOptions() {
    const page = await get('/jobs?limit=1000');
    for (const j of page.items) jobNameCache[j.id] = j.name;
    return [['', t('filter.allJobs')], ...page.items.map((j) => [j.id, '#' + j.id + ' ' + j.name])];
  }

  async function firesPage(root, params, query) {
    const offset = Number(query.offset || 0);
    const filter = { job_id: query.job_id || '', state: query.state || '', from: query.from || '', to: query.to || '' };
    const [page, jobOpts] = await Promise.all([get('/fires' + qs(Object.assign({}, filter, { offset, limit: PAGE }))), jobFilterOptions()]);
    const names = await jobNames(page.items.map((f) => f.job_id));
    const go = (f) => { location.hash = '#/fires' + qs(f); };
    const form = h('form', { class: 'filters', id: 'fire-filters' },
      select('job_id', jobOpts, filter.job_id),
      select('state', [['', t('filter.anyState')], ...opts('state', FIRE_STATES)], filter.state),
      h('label', { class: 'inline' }, t('filter.from'), input('from', toLocalInput(Number(filter.from)), { type: 'datetime-local' })),
      h('label', { class: 'inline' }, t('filter.to'), input('to', toLocalInput(Number(filter.to)), { type: 'datetime-local' })),
      h('button', { type: 'submit' }, t('common.search')));
    form.addEventListener('submit', (e) => {
      e.preventDefault();
      const fd = new FormData(form);
      go({ job_id: fd.get('job_id'), state: fd.get('state'), from: fromLocalInput(fd.get('from')), to: fromLocalInput(fd.get('to')) });
    });
    append(root,
      h('div', { class: 'page-head' }, h('h1', null, t('nav.fires')),
        h('button', { type: 'button', class: 'danger', id: 'fires-clear', onclick: () => clearFires(filter.job_id, jobOpts) }, t('fire.clear'))),
      form,
      table([t('col.fire'), t('col.job'), t('col.trigger'), t('col.planned'), t('col.items'), t('col.state'), t('col.message')],
        page.items.map((f) => ({
          cells: [link('#/fires/' + f.id, '#' + f.id), link('#/jobs/' + f.job_id, names[f.job_id] || '#' + f.job_id),
            enumLabel('trigger', f.trigger_type), fmtTime(f.planned_at), String(f.total_items), stateBadge(f.state),
            h('span', { class: 'msg' }, noteText(f.message_note, f.message).slice(0, 120))],
        })),
        { id: 'fires-table', empty: t('fire.empty') }),
      pager(page.total, offset, PAGE, (o) => go(Object.assign({}, filter, { offset: o }))));
  }

  // XXL-JOB's "clear logs": the ended fires of a group or job (open ones stay), by age or count.
  const CLEAR_CUTS = [['days:30', 'older1m'], ['days:90', 'older3m'], ['days:180', 'older6m'], ['days:365', 'older1y'],
    ['keep:1000', 'keep1k'], ['keep:10000', 'keep10k'], ['keep:30000', 'keep30k'], ['keep:100000', 'keep100k'], ['all', 'all']];

  async function clearFires(jobId, jobOpts) {
    const list = await groups();
    const groupSel = select('clear_group', [['', t('filter.allGroups')], ...list.map((g) => [g.id, groupName(list, g.id)])], '');
    const jobSel = select('clear_job', jobOpts, jobId || '');
    const cutSel = select('clear_cut', CLEAR_CUTS.map(([v, k]) => [v, t('clear.' + k)]), 'days:30');
    const body = h('div', null,
      field(t('col.group'), groupSel), field(t('col.job'), jobSel), field(t('clear.what'), cutSel),
      h('p', { class: 'hint' }, t('clear.hint')));
    const res = await dialog(t('fire.clearTitle'), body, t('fire.clearOk'), () => {
      const req = {};
      if (groupSel.value) req.group_id = Number(groupSel.value);
      if (jobSel.value) req.job_id = Number(jobSel.value);
      const [kind, n] = cutSel.value.split(':');
      if (kind === 'days') req.older_than_days = Number(n);
      else if (kind === 'keep') req.keep_newest = Number(n);
      else req.all = true;
      return post('/fires/clear', req);
    }, true);
    if (res) {
      flash(t('fire.cleared', { fires: res.fires, runs: res.runs }), 'ok');
      route();
    }
  }

  // The coverage counts in the console's language (the API's `summary` is the English line).
  function coverageLine(c) {
    const parts = [t('coverage.succeeded', { ok: c.succeeded, total: c.total })];
    for (const k of ['failed', 'running', 'missing']) {
      if (c[k] > 0) parts.push(t('coverage.' + k, { n: c[k] }));
    }
    return parts.join(t('coverage.sep'));
  }

  async function firePage(root, params) {
    const leave = onLeave();
    const id = params[0];
    const f = await get('/fires/' + id);
    const names = await jobNames([f.job_id]);
    const c = f.coverage;
    const retry = async () => {
      const r = await act(() => post('/fires/' + id + '/retry'));
      if (r) {
        flash(t('fire.retried', { items: r.retried_items.join(', ') }));
        route();
      }
    };
    const cells = [];
    const byItem = {};
    for (const it of c.items) byItem[it.item] = it;
    for (let i = 0; i < c.total; i++) {
      const it = byItem[i];
      const state = it ? it.state : 'missing';
      const tip = it ? `${t('col.item')} ${i}: ${enumLabel('state', state)} — ${it.executor_address || '—'}` +
        (it.history.length ? ` (${it.history.join('; ')})` : '') : `${t('col.item')} ${i}: ${t('state.missing')}`;
      cells.push(it ? link('#/runs/' + it.run_id, String(i), { class: 'cell state-' + state, title: tip, 'data-item': i, 'data-state': state })
        : h('span', { class: 'cell state-missing', title: tip, 'data-item': i, 'data-state': 'missing' }, String(i)));
    }
    // Items past the planned total (a manual shard), still shown.
    for (const it of c.items) {
      if (it.item >= c.total) cells.push(link('#/runs/' + it.run_id, String(it.item), { class: 'cell state-' + it.state, 'data-item': it.item, 'data-state': it.state }));
    }
    const canRetry = f.state === 'failed' || f.state === 'succeeded' ? c.failed > 0 : false;
    append(root,
      h('div', { class: 'page-head' }, h('h1', null, t('fire.title', { id }), ' ', stateBadge(f.state)),
        h('div', { class: 'actions' },
          canRetry ? h('button', { type: 'button', class: 'primary', onclick: retry, id: 'fire-retry' }, t('fire.retry')) : null,
          h('button', { type: 'button', onclick: () => route(), id: 'fire-refresh' }, t('common.refresh')))),
      h('dl', { class: 'facts' },
        h('dt', null, t('col.job')), h('dd', null, link('#/jobs/' + f.job_id, names[f.job_id])),
        h('dt', null, t('col.trigger')), h('dd', null, enumLabel('trigger', f.trigger_type)),
        h('dt', null, t('col.planned')), h('dd', null, fmtTime(f.planned_at)),
        h('dt', null, t('col.dispatched')), h('dd', null, fmtTime(f.dispatched_at)),
        h('dt', null, t('col.finished')), h('dd', null, fmtTime(f.finished_at)),
        h('dt', null, t('col.params')), h('dd', null, h('code', null, f.params || '—')),
        f.parent_fire_id ? [h('dt', null, t('fire.parent')), h('dd', null, link('#/fires/' + f.parent_fire_id, '#' + f.parent_fire_id))] : null,
        f.alarm_state ? [h('dt', null, t('fire.alarm')), h('dd', { id: 'fire-alarm' }, enumLabel('alarm', f.alarm_state))] : null,
        f.message ? [h('dt', null, t('col.message')), h('dd', { id: 'fire-message' }, noteText(f.message_note, f.message))] : null),
      h('section', { class: 'panel' }, h('h2', null, t('fire.coverage')),
        h('p', { class: 'coverage-summary', id: 'coverage-summary' }, coverageLine(c)),
        h('div', { class: 'coverage', id: 'coverage' }, cells),
        h('p', { class: 'legend' }, ['succeeded', 'running', 'failed', 'timed_out', 'killed', 'lost', 'missing'].map((st) =>
          [h('span', { class: 'key cell state-' + st }), enumLabel('state', st)]))),
      h('section', { class: 'panel' }, h('h2', null, t('fire.runs')),
        table([t('col.run'), t('col.item'), t('col.attempt'), t('col.executor'), t('col.state'), t('col.duration'), t('col.message')],
          f.runs.map((r) => ({
            attrs: { class: r.superseded ? 'superseded' : null },
            cells: [link('#/runs/' + r.id, '#' + r.id), r.shard_index + '/' + r.shard_total, String(r.attempt), r.executor_address || '—',
              stateBadge(r.state), duration(r.dispatched_at || r.created_at, r.finished_at), h('span', { class: 'msg' }, runMessage(r).slice(0, 160))],
          })),
          { id: 'fire-runs' })));
    if (f.state === 'triggering' || f.state === 'running') {
      const timer = setTimeout(() => route(), 2000);
      leave(() => clearTimeout(timer));
    }
  }

  // ---------------------------------------------------------------- runs

  async function runsPage(root, params, query) {
    const offset = Number(query.offset || 0);
    const filter = { job_id: query.job_id || '', state: query.state || '', fire_id: query.fire_id || '', from: query.from || '', to: query.to || '' };
    const [page, jobOpts] = await Promise.all([get('/runs' + qs(Object.assign({}, filter, { offset, limit: PAGE }))), jobFilterOptions()]);
    const names = await jobNames(page.items.map((r) => r.job_id));
    const go = (f) => { location.hash = '#/runs' + qs(f); };
    const form = h('form', { class: 'filters', id: 'run-filters' },
      select('job_id', jobOpts, filter.job_id),
      select('state', [['', t('filter.anyState')], ...opts('state', RUN_STATES)], filter.state),
      h('label', { class: 'inline' }, t('filter.from'), input('from', toLocalInput(Number(filter.from)), { type: 'datetime-local' })),
      h('label', { class: 'inline' }, t('filter.to'), input('to', toLocalInput(Number(filter.to)), { type: 'datetime-local' })),
      h('button', { type: 'submit' }, t('common.search')));
    form.addEventListener('submit', (e) => {
      e.preventDefault();
      const fd = new FormData(form);
      go({ job_id: fd.get('job_id'), state: fd.get('state'), fire_id: filter.fire_id, from: fromLocalInput(fd.get('from')), to: fromLocalInput(fd.get('to')) });
    });
    append(root,
      h('div', { class: 'page-head' }, h('h1', null, t('nav.runs'))),
      form,
      table([t('col.run'), t('col.job'), t('col.fire'), t('col.item'), t('col.executor'), t('col.state'), t('col.time'), t('col.duration'), t('col.message')],
        page.items.map((r) => ({
          attrs: { class: r.superseded ? 'superseded' : null },
          cells: [link('#/runs/' + r.id, '#' + r.id), link('#/jobs/' + r.job_id, names[r.job_id] || '#' + r.job_id), link('#/fires/' + r.fire_id, '#' + r.fire_id),
            r.shard_index + '/' + r.shard_total, r.executor_address || '—', stateBadge(r.state), fmtTime(r.created_at),
            duration(r.dispatched_at || r.created_at, r.finished_at), h('span', { class: 'msg' }, runMessage(r).slice(0, 120))],
        })),
        { id: 'runs-table', empty: t('run.empty') }),
      pager(page.total, offset, PAGE, (o) => go(Object.assign({}, filter, { offset: o }))));
  }

  async function runPage(root, params) {
    const leave = onLeave();
    const id = params[0];
    let r = await get('/runs/' + id);
    const names = await jobNames([r.job_id]);
    const open = () => r.state === 'triggering' || r.state === 'running';
    const stateBox = h('span', { id: 'run-state' }, stateBadge(r.state));
    const handleBox = h('dd', { id: 'run-result' }, resultText(r));
    const finishedBox = h('dd', null, fmtTime(r.finished_at));
    const logPre = h('pre', { class: 'log', id: 'run-log' });
    const logState = h('span', { class: 'badge', id: 'log-state' });
    const killBtn = h('button', { type: 'button', class: 'danger', id: 'run-kill', hidden: !open() }, t('run.kill'));
    killBtn.addEventListener('click', async () => {
      if (!(await confirmDialog(t('run.killConfirm', { id }), t('run.kill')))) return;
      const res = await act(() => post('/runs/' + id + '/kill'));
      if (res) {
        flash(t('run.killed', { state: enumLabel('state', res.state) }));
        await refresh();
      }
    });
    const refresh = async () => {
      try {
        r = await get('/runs/' + id);
      } catch (e) {
        return;
      }
      clear(stateBox).appendChild(stateBadge(r.state));
      handleBox.textContent = resultText(r);
      finishedBox.textContent = fmtTime(r.finished_at);
      killBtn.hidden = !open();
    };
    let line = 1;
    let alive = true;
    let timer = null;
    leave(() => { alive = false; clearTimeout(timer); });
    // Live tail: read from the next line until the run is over and the executor has nothing new.
    const poll = async () => {
      if (!alive) return;
      try {
        const log = await get('/runs/' + id + '/log' + qs({ from_line: line }));
        if (!alive) return;
        if (log.content) {
          const atBottom = logPre.scrollHeight - logPre.scrollTop - logPre.clientHeight < 40;
          logPre.appendChild(document.createTextNode(log.content.endsWith('\n') ? log.content : log.content + '\n'));
          if (atBottom) logPre.scrollTop = logPre.scrollHeight;
        }
        if (log.to_line >= line) line = log.to_line + 1;
        if (log.state !== r.state) await refresh();
        if (log.is_end) {
          logState.textContent = t('run.logEnd');
          logState.className = 'badge off';
          await refresh();
          return;
        }
        logState.textContent = t('run.logLive');
        logState.className = 'badge on live';
      } catch (err) {
        logState.textContent = err.message;
        logState.className = 'badge state-failed';
        if (err.status === 409 || err.status === 403 || err.status === 404) return;
      }
      timer = setTimeout(poll, 1000);
    };
    append(root,
      h('div', { class: 'page-head' }, h('h1', null, t('run.title', { id }), ' ', stateBox),
        h('div', { class: 'actions' }, killBtn, link('#/fires/' + r.fire_id, t('run.fire', { id: r.fire_id }), { class: 'button' }))),
      h('dl', { class: 'facts' },
        h('dt', null, t('col.job')), h('dd', null, link('#/jobs/' + r.job_id, names[r.job_id])),
        h('dt', null, t('col.item')), h('dd', null, r.shard_index + '/' + r.shard_total + (r.item_param ? ' (' + r.item_param + ')' : '')),
        h('dt', null, t('col.attempt')), h('dd', null, String(r.attempt)),
        h('dt', null, t('col.executor')), h('dd', { id: 'run-executor' }, r.executor_address || '—'),
        h('dt', null, t('col.handler')), h('dd', null, r.handler || '—'),
        h('dt', null, t('col.params')), h('dd', null, h('code', null, r.params || '—')),
        h('dt', null, t('col.created')), h('dd', null, fmtTime(r.created_at)),
        h('dt', null, t('col.dispatched')), h('dd', null, fmtTime(r.dispatched_at)),
        h('dt', null, t('col.finished')), finishedBox,
        h('dt', null, t('run.triggerMsg')), h('dd', null, h('pre', { class: 'msg-block', id: 'run-trigger-msg' }, (r.trigger_code ? r.trigger_code + ' ' : '') + (noteText(r.trigger_note, r.trigger_msg) || '—'))),
        h('dt', null, t('run.result')), handleBox),
      h('section', { class: 'panel' }, h('div', { class: 'panel-head' }, h('h2', null, t('run.log')), logState), logPre));
    if (r.executor_address) poll();
    else {
      logState.textContent = t('run.noLog');
    }
  }

  // ---------------------------------------------------------------- users and tokens

  async function usersPage(root) {
    if (!IS_ADMIN) {
      root.appendChild(errorBox({ status: 403, message: t('user.adminOnly') }));
      return;
    }
    const [users, list] = await Promise.all([get('/users'), groups(true)]);
    // The user's groups, a field as the others are: a refused group_ids is marked and named by
    // the legend.
    const groupChecks = (selected) => h('fieldset', { id: 'field-group_ids' }, h('legend', { class: 'label' }, t('user.groups')),
      h('div', { class: 'checks' }, list.length ? list.map((g) => h('label', { class: 'check' },
        h('input', { type: 'checkbox', value: g.id, class: 'group-check', checked: selected.includes(g.id) }), ' ', g.title + ' (' + g.appname + ')')) : t('user.noGroups')));
    const pickedGroups = (box) => [...box.querySelectorAll('.group-check')].filter((c) => c.checked).map((c) => Number(c.value));
    const create = async () => {
      const name = input('username', '', { required: true, maxlength: 64, autocomplete: 'off' });
      const pw = input('password', '', { type: 'password', required: true, minlength: 8, autocomplete: 'new-password' });
      const role = select('role', [['USER', t('role.USER')], ['ADMIN', t('role.ADMIN')]], 'USER');
      const checks = groupChecks([]);
      const u = await dialog(t('user.new'), h('div', null, field(t('user.username'), name, null, 'username'),
        field(t('user.password'), pw, t('user.passwordHint'), 'password'), field(t('user.role'), role, null, 'role'), checks), t('common.create'),
      () => post('/users', { username: name.value.trim(), password: pw.value, role: role.value, group_ids: pickedGroups(checks) }));
      if (u) {
        flash(t('common.saved'));
        route();
      }
    };
    const edit = async (u) => {
      const role = select('role', [['USER', t('role.USER')], ['ADMIN', t('role.ADMIN')]], u.role);
      const ids = u.group_ids.split(',').filter(Boolean).map(Number);
      const checks = groupChecks(ids);
      const ok = await dialog(t('user.edit', { name: u.username }), h('div', null, field(t('user.role'), role, null, 'role'), checks), t('common.save'),
      () => put('/users/' + u.id, { role: role.value, group_ids: pickedGroups(checks) }));
      if (ok) {
        flash(t('common.saved'));
        route();
      }
    };
    const reset = async (u) => {
      const pw = input('password', '', { type: 'password', required: true, minlength: 8, autocomplete: 'new-password' });
      const ok = await dialog(t('user.resetPassword', { name: u.username }), field(t('user.password'), pw, t('user.passwordHint'), 'password'), t('common.save'),
        () => post('/users/' + u.id + '/password', { password: pw.value }));
      if (ok !== null) flash(t('common.saved'));
    };
    const remove = async (u) => {
      if (!(await confirmDialog(t('user.deleteConfirm', { name: u.username }), t('common.delete')))) return;
      if (await act(() => del('/users/' + u.id), t('common.deleted'))) route();
    };
    append(root,
      h('div', { class: 'page-head' }, h('h1', null, t('nav.users')), h('button', { type: 'button', class: 'primary', onclick: create, id: 'new-user' }, t('user.new'))),
      table([t('user.username'), t('user.role'), t('user.groups'), t('col.created'), ''],
        users.map((u) => ({
          attrs: { 'data-user': u.username },
          cells: [u.username, enumLabel('role', u.role),
            u.role === 'ADMIN' ? t('user.allGroups') : (u.group_ids ? u.group_ids.split(',').filter(Boolean).map((g) => groupName(list, Number(g))).join(', ') : '—'),
            fmtTime(u.created_at),
            h('span', { class: 'row-actions' },
              h('button', { type: 'button', class: 'small', onclick: () => edit(u) }, t('common.edit')),
              h('button', { type: 'button', class: 'small', onclick: () => reset(u) }, t('user.password')),
              u.id !== ME.id ? h('button', { type: 'button', class: 'small danger', onclick: () => remove(u) }, t('common.delete')) : null)],
        })),
        { id: 'users-table' }));
  }

  async function tokensPage(root) {
    const tokens = await get('/tokens');
    let users = [];
    if (IS_ADMIN) users = await get('/users');
    const userName = (id) => (users.find((u) => u.id === id) || { username: id === ME.id ? ME.username : '#' + id }).username;
    const secretBox = h('div', { id: 'token-secret' });
    const create = async () => {
      const name = input('name', '', { required: true, maxlength: 128, placeholder: 'ci-deploy' });
      const owner = IS_ADMIN ? select('user_id', users.map((u) => [u.id, u.username]), ME.id) : null;
      const tok = await dialog(t('token.new'), h('div', null, field(t('token.name'), name, null, 'name'), owner ? field(t('token.owner'), owner, null, 'user_id') : null), t('common.create'),
        () => post('/tokens', { name: name.value.trim(), user_id: owner ? Number(owner.value) : undefined }));
      if (!tok) return;
      await route();
      // The secret exists only in this answer: show it once, with a way to copy it.
      const box = document.getElementById('token-secret');
      if (!box) return;
      const code = h('code', { class: 'secret', id: 'token-secret-value' }, tok.secret);
      append(clear(box), h('div', { class: 'notice ok' },
        h('p', null, h('strong', null, t('token.shownOnce'))), code, ' ',
        h('button', { type: 'button', class: 'small', onclick: () => navigator.clipboard && navigator.clipboard.writeText(tok.secret).then(() => flash(t('token.copied'))) }, t('token.copy'))));
    };
    const revoke = async (tk) => {
      if (!(await confirmDialog(t('token.revokeConfirm', { name: tk.name }), t('token.revoke')))) return;
      if (await act(() => del('/tokens/' + tk.id), t('token.revoked'))) route();
    };
    append(root,
      h('div', { class: 'page-head' }, h('h1', null, t('nav.tokens')), h('button', { type: 'button', class: 'primary', onclick: create, id: 'new-token' }, t('token.new'))),
      h('p', { class: 'hint' }, t('token.about')),
      secretBox,
      table([t('token.name'), t('token.owner'), t('token.prefix'), t('col.created'), t('token.lastUsed'), t('col.status'), ''],
        tokens.map((tk) => ({
          cells: [tk.name, userName(tk.user_id), h('code', null, tk.prefix + '…'), fmtTime(tk.created_at), tk.last_used_at ? ago(tk.last_used_at) : '—',
            tk.revoked_at ? h('span', { class: 'badge off' }, t('token.revoked')) : h('span', { class: 'badge on' }, t('token.active')),
            tk.revoked_at ? null : h('button', { type: 'button', class: 'small danger', onclick: () => revoke(tk) }, t('token.revoke'))],
        })),
        { id: 'tokens-table', empty: t('token.empty') }));
  }

  // Who changed what (ADMIN): every change request of an identified caller, newest first.
  async function auditPage(root, params, query) {
    const offset = Number(query.offset || 0);
    const username = query.username || '';
    const page = await get('/audit' + qs({ username, offset, limit: PAGE }));
    const go = (f) => { location.hash = '#/audit' + qs(f); };
    const form = h('form', { class: 'filters', id: 'audit-filters' },
      input('username', username, { placeholder: t('audit.user') }),
      h('button', { type: 'submit' }, t('common.search')));
    form.addEventListener('submit', (e) => {
      e.preventDefault();
      go({ username: new FormData(form).get('username').trim() });
    });
    append(root,
      h('div', { class: 'page-head' }, h('h1', null, t('nav.audit'))),
      h('p', { class: 'hint' }, t('audit.about')),
      form,
      table([t('col.time'), t('audit.user'), t('audit.via'), t('audit.request'), t('col.status')],
        page.items.map((e) => ({
          cells: [fmtTime(e.at), e.username, e.console ? t('audit.console') : t('audit.token'),
            h('code', null, e.method + ' ' + e.path),
            h('span', { class: 'badge ' + (e.status < 400 ? 'on' : 'off') }, String(e.status))],
        })),
        { id: 'audit-table', empty: t('audit.empty') }),
      pager(page.total, offset, PAGE, (o) => go({ username, offset: o })));
  }

  // ---------------------------------------------------------------- shell and routing

  const PAGES = [
    [/^\/?$/, dashboardPage, 'dashboard'],
    [/^\/groups$/, groupsPage, 'groups'],
    [/^\/groups\/new$/, groupNewPage, 'groups'],
    [/^\/groups\/(\d+)$/, groupPage, 'groups'],
    [/^\/jobs$/, jobsPage, 'jobs'],
    [/^\/jobs\/new$/, jobNewPage, 'jobs'],
    [/^\/jobs\/(\d+)$/, jobPage, 'jobs'],
    [/^\/jobs\/(\d+)\/glue$/, gluePage, 'jobs'],
    [/^\/fires$/, firesPage, 'fires'],
    [/^\/fires\/(\d+)$/, firePage, 'fires'],
    [/^\/runs$/, runsPage, 'runs'],
    [/^\/runs\/(\d+)$/, runPage, 'runs'],
    [/^\/users$/, usersPage, 'users'],
    [/^\/tokens$/, tokensPage, 'tokens'],
    [/^\/audit$/, auditPage, 'audit'],
  ];

  function parseHash() {
    const raw = location.hash.replace(/^#/, '') || '/';
    const [path, q] = raw.split('?');
    const query = {};
    if (q) {
      for (const part of q.split('&')) {
        const [k, v] = part.split('=');
        if (k) query[decodeURIComponent(k)] = decodeURIComponent((v || '').replace(/\+/g, ' '));
      }
    }
    return { path, query };
  }

  function renderShell() {
    document.documentElement.lang = lang === 'zh' ? 'zh-CN' : 'en';
    document.title = 'Shardline';
    const nav = [['dashboard', '#/'], ['groups', '#/groups'], ['jobs', '#/jobs'], ['fires', '#/fires'], ['runs', '#/runs']];
    if (IS_ADMIN) nav.push(['users', '#/users']);
    nav.push(['tokens', '#/tokens']);
    if (IS_ADMIN) nav.push(['audit', '#/audit']);
    const langSel = h('select', { id: 'lang-select', 'aria-label': t('nav.language') },
      h('option', { value: 'en', selected: lang === 'en' }, 'English'), h('option', { value: 'zh', selected: lang === 'zh' }, '简体中文'));
    langSel.addEventListener('change', async () => {
      const next = langSel.value;
      try {
        const resp = await fetch('/console/lang', {
          method: 'POST', credentials: 'same-origin',
          headers: { 'Content-Type': 'application/json', 'X-CSRF-Token': CSRF }, body: JSON.stringify({ lang: next }),
        });
        if (!resp.ok) throw new Error(resp.statusText);
      } catch (e) {
        flash(t('err.network'), 'error');
      }
      lang = next;
      renderShell();
      route();
    });
    const menu = h('button', { type: 'button', class: 'menu-toggle', id: 'menu-toggle', 'aria-label': t('nav.menu'), 'aria-expanded': 'false' }, '☰');
    const navEl = h('nav', { class: 'nav', id: 'nav' }, nav.map(([k, href]) => link(href, t('nav.' + k), { 'data-nav': k, id: 'nav-' + k })));
    menu.addEventListener('click', () => {
      const open = navEl.classList.toggle('open');
      menu.setAttribute('aria-expanded', String(open));
    });
    const logout = h('form', { method: 'post', action: '/console/logout', class: 'logout' },
      h('input', { type: 'hidden', name: 'csrf', value: CSRF }),
      h('button', { type: 'submit', class: 'link', id: 'logout' }, t('nav.logout')));
    const app = clear(document.getElementById('app'));
    append(app,
      h('header', { class: 'topbar' },
        h('a', { class: 'brand', href: '#/' }, h('img', { src: '/console/assets/favicon.svg', alt: '', width: 22, height: 22 }), 'Shardline'),
        menu, navEl,
        h('div', { class: 'me' }, langSel,
          h('span', { class: 'user', id: 'me', title: enumLabel('role', ME.role) }, ME.username),
          link('/console/password', t('nav.password'), { class: 'link' }), logout)),
      h('div', { id: 'flash', class: 'flash-box', 'aria-live': 'polite' }),
      h('main', { id: 'main', class: 'main' }));
  }

  let routeSeq = 0;
  let lastPath = null;
  async function route() {
    const previous = leaveList;
    leaveList = [];
    for (const fn of previous) fn();
    const mine = ++routeSeq;
    const myLeave = leaveList;
    const { path, query } = parseHash();
    const main = document.getElementById('main');
    const nav = document.getElementById('nav');
    if (nav) nav.classList.remove('open');
    let found = null;
    for (const [re, fn, section] of PAGES) {
      const m = path.match(re);
      if (m) {
        found = { fn, section, params: m.slice(1) };
        break;
      }
    }
    document.querySelectorAll('.nav a').forEach((a) => a.classList.toggle('active', !!found && a.dataset.nav === found.section));
    const root = h('div', { class: 'page', 'data-page': found ? found.section : 'none' });
    if (!found) {
      root.appendChild(errorBox({ status: 404, message: path }));
    } else {
      try {
        await found.fn(root, found.params, query);
      } catch (err) {
        clear(root).appendChild(errorBox(err));
      }
    }
    if (mine !== routeSeq) {
      for (const fn of myLeave) fn();
      return;
    }
    root.setAttribute('data-ready', '1');
    clear(main).appendChild(root);
    // A new page starts at its top; a refresh of the same page keeps the reader's place.
    if (path !== lastPath) window.scrollTo(0, 0);
    lastPath = path;
  }

  window.addEventListener('hashchange', route);
  renderShell();
  route();
})();
