// The scripter's JavaScript prelude: a fetch-like API over the host function
// `__http_request`, run once at the start of every session. Host calls are synchronous; the
// API returns promises as browsers do, so `await` and `.then` both work.
(() => {
  const request = globalThis.__http_request;
  class FetchError extends Error {
    constructor(message) {
      super(message);
      this.name = 'FetchError';
    }
  }
  const hostMessage = (e) =>
    String(e && e.message !== undefined ? e.message : e).replace(/^__http_request: /, '');
  class Headers {
    constructor(init) {
      const map = {};
      if (init instanceof Headers) init = init.toJSON();
      for (const [k, v] of Object.entries(init || {})) map[String(k).toLowerCase()] = String(v);
      Object.defineProperty(this, 'map', { value: map });
    }
    get(name) {
      const v = this.map[String(name).toLowerCase()];
      return v === undefined ? null : v;
    }
    has(name) {
      return Object.prototype.hasOwnProperty.call(this.map, String(name).toLowerCase());
    }
    keys() { return Object.keys(this.map); }
    entries() { return Object.entries(this.map); }
    forEach(fn) { for (const [k, v] of Object.entries(this.map)) fn(v, k, this); }
    toJSON() { return Object.assign({}, this.map); }
  }
  const response = (r) => {
    const body = r.body;
    const b64 = r.body_base64;
    const info = {
      status: r.status,
      statusText: r.status_text,
      ok: r.ok,
      url: r.url,
      redirected: r.redirected,
      headers: new Headers(r.headers),
    };
    const reject = (message) => Promise.reject(new FetchError(message));
    return Object.freeze(Object.assign(info, {
      text() {
        if (body === undefined) return reject('this response was fetched with { binary: true }; read it with base64()');
        return Promise.resolve(body);
      },
      json() {
        if (body === undefined) return reject('this response was fetched with { binary: true }; read it with base64()');
        try {
          return Promise.resolve(JSON.parse(body));
        } catch (e) {
          return reject(`the response from ${r.url} (status ${r.status}) is not JSON (${e.message}); it starts with: ${body.slice(0, 200)}`);
        }
      },
      base64() {
        if (b64 === undefined) return reject('fetch with { binary: true } to read the body as base64');
        return Promise.resolve(b64);
      },
      toJSON() {
        return { status: info.status, statusText: info.statusText, ok: info.ok, url: info.url, redirected: info.redirected, headers: info.headers.toJSON() };
      },
    }));
  };
  async function fetch(url, options) {
    const o = options || {};
    if (url && typeof url === 'object' && typeof url.url === 'string') url = url.url;
    const req = { url: String(url) };
    if (o.method !== undefined) req.method = o.method;
    if (o.headers !== undefined && o.headers !== null) req.headers = new Headers(o.headers).toJSON();
    if (o.json !== undefined) req.json = o.json;
    if (o.body !== undefined && o.body !== null) {
      req[typeof o.body === 'object' ? 'json' : 'body'] = typeof o.body === 'object' ? o.body : String(o.body);
    }
    if (o.timeout_ms !== undefined) req.timeout_ms = o.timeout_ms;
    if (o.binary) req.binary = true;
    let r;
    try {
      r = request(req);
    } catch (e) {
      if (e && (e.name === 'HostError' || e.name === 'TypeError' || e.name === 'RangeError')) {
        throw new FetchError(hostMessage(e));
      }
      throw e;
    }
    return response(r);
  }
  async function fetchJson(url, options) {
    const res = await fetch(url, options);
    if (!res.ok) {
      const text = res.status === 204 ? '' : await res.text();
      throw new FetchError(`${res.url} answered ${res.status} ${res.statusText}: ${text.slice(0, 300)}`);
    }
    return res.status === 204 ? null : res.json();
  }
  for (const [name, value] of Object.entries({ fetch, fetchJson, FetchError, Headers })) {
    Object.defineProperty(globalThis, name, { value, writable: false, enumerable: false, configurable: false });
  }
})();
