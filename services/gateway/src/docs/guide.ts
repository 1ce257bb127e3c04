import { CHANNELS, describePartnerEvent, PARTNER_EVENT_TYPES, PERMISSIONS, permissionToReceive, WEBHOOK_TEST_TYPE } from '@fleet/contracts';
import { COMPRESS_FROM_BYTES } from '../http/answer-encoding';
import { MAX_BODY_DEPTH } from '../http/request-validation';
import { API_DOCUMENT_VERSION } from '../openapi/build';
import { MAX_OPEN_STREAMS, MAX_WEBHOOKS } from '../routes/events';
import { TIME_RANGE_TEXT } from '../routes/schemas';
import { ERROR_CODES, PERMISSION_GRANTS } from '../openapi/reference';
import { escapeHtml, inlineCode, page } from './html';

export interface GuideLinks {
  reference: string;
  openapi: string;
  changelog: string;
}

/** Permissions shown granted in the sample account answer (illustrative only). */
const SAMPLE_GRANTED = new Set<string>(['state_read', 'health_read', 'config_read', 'predefined_commands']);

function sampleAccount(): string {
  const permissions = Object.fromEntries(PERMISSIONS.map((p) => [p, SAMPLE_GRANTED.has(p)]));
  return JSON.stringify(
    {
      partner: {
        name: 'Example Partner',
        key_prefix: '<prefix>_<handle>',
        permissions,
        allowed_channels: [...CHANNELS],
        rate_limits: { requests_per_min: 600, device_commands_per_min: 60 },
      },
    },
    null,
    2,
  );
}

const SAMPLE_ERROR = JSON.stringify(
  {
    error: 'This key does not have the state_read permission.',
    code: 'forbidden',
    request_id: 'req_Vb3kQ9xT2mLp7Rw1',
    required_permission: 'state_read',
  },
  null,
  2,
);

const row = (cells: string[]): string => `<tr>${cells.map((c) => `<td>${c}</td>`).join('')}</tr>`;

const SAMPLE_EVENT = JSON.stringify(
  {
    id: 'evt_5f0c2a9e7b4d4c1f9a3e8d6b2c1f0e9d',
    type: 'device.disconnected',
    version: 1,
    occurred_at: '2026-11-26T09:14:03.512Z',
    device_id: '0A1B2C3D4E5F',
    data: { status: 'disconnected', status_changed_at: '2026-11-26T09:14:03.512Z' },
  },
  null,
  2,
);

/** When each attempt of a webhook delivery is made, after the one before (the first at once). */
export const RETRY_SCHEDULE = ['at once', '5 s', '5 min', '30 min', '2 h', '5 h', '10 h', '10 h', '10 h', '10 h', '14 h'] as const;

/** The receiver of the guide: verifying with the standardwebhooks package (5 lines). */
const VERIFY_EXAMPLE = `import { Webhook } from 'standardwebhooks';
const wh = new Webhook(process.env.WEBHOOK_SECRET); // the whsec_… secret of the endpoint
app.post('/fleet-events', express.raw({ type: 'application/json' }), (req, res) => {
  try { handle(wh.verify(req.body, req.headers)); res.sendStatus(204); } catch { res.sendStatus(400); }
});`;

/** The quick-start guide for partners, served at /docs. */
export function renderGuide(baseUrl: string, links: GuideLinks): string {
  const base = escapeHtml(baseUrl);
  const ref = escapeHtml(links.reference);
  const openapi = escapeHtml(links.openapi);
  const changelog = escapeHtml(links.changelog);

  const permissionRows = PERMISSIONS.map((p) => row([`<code>${escapeHtml(p)}</code>`, inlineCode(PERMISSION_GRANTS[p])])).join('\n');
  const eventRows = [
    ...PARTNER_EVENT_TYPES.map((type) => {
      const permission = permissionToReceive(type);
      return row([`<code>${escapeHtml(type)}</code>`, permission === null ? 'none (the device in scope is enough)' : `<code>${escapeHtml(permission)}</code>`, inlineCode(describePartnerEvent(type).description)]);
    }),
    row([`<code>${escapeHtml(WEBHOOK_TEST_TYPE)}</code>`, 'none', 'Webhooks only: sent to one endpoint when you ask for it (<code>POST /v1/webhooks/{webhook_id}/test</code>); no <code>device_id</code>.']),
  ].join('\n');
  const errorRows = ERROR_CODES.map((e) =>
    row([e.status === 500 ? '5xx' : String(e.status), e.code.startsWith('(') ? escapeHtml(e.code) : `<code>${escapeHtml(e.code)}</code>`, inlineCode(e.meaning)]),
  ).join('\n');

  const body = `<header>
<h1>Partner Device API: quick start</h1>
<p>Operate notification lights and energy meters in your scope over a JSON HTTP API.</p>
<nav aria-label="Contents">
<ul>
<li><a href="#base-url">Base URL</a></li>
<li><a href="#keys">API keys</a></li>
<li><a href="#first-call">First call</a></li>
<li><a href="#permissions">Permissions</a></li>
<li><a href="#responses">Responses</a></li>
<li><a href="#errors">Errors</a></li>
<li><a href="#rate-limits">Rate limits</a></li>
<li><a href="#idempotency">Idempotency</a></li>
<li><a href="#cursors">Cursors</a></li>
<li><a href="#light-commands">Light commands and effects</a></li>
<li><a href="#alerting">Temperature alerting</a></li>
<li><a href="#files">System interface and file push</a></li>
<li><a href="#push-events">Push events</a></li>
<li><a href="#versioning">Versioning</a></li>
<li><a href="#more">Reference</a></li>
</ul>
</nav>
</header>
<main>
<section id="overview">
<h2>What you can do</h2>
<p>The API lets approved partners work with the devices in their scope: notification lights (product <code>light</code>, channels <code>light1</code>, <code>light2</code>, <code>light3</code>, <code>sound</code>, <code>contact</code>) and single-phase energy meters (product <code>meter</code>, routes under <code>/v1/meter</code>). You can list and read devices, send commands and effects to lights, read light state and health, manage configuration, alert profiles and signals, use a device's system interface, and read meter data.</p>
<p>The full list of operations, with every parameter, field and error, is in the <a href="${ref}">API reference</a>.</p>
</section>

<section id="base-url">
<h2>Base URL and HTTPS</h2>
<p>Every route is under <code>/v1</code> on this address:</p>
<pre><code>${base}</code></pre>
<p>HTTPS is mandatory (a fleet run locally for development with <code>npm start</code> answers plain HTTP on 127.0.0.1). All requests and responses are JSON objects. The examples below use a shell variable for the address and your key:</p>
<pre><code>export BASE_URL='${base}'
export API_KEY='&lt;your API key&gt;'</code></pre>
</section>

<section id="keys">
<h2>Getting an API key</h2>
<p>API keys are issued by service staff: ask your contact for one. A key looks like <code>&lt;prefix&gt;_&lt;handle&gt;_&lt;secret&gt;</code>. Only the <code>&lt;prefix&gt;_&lt;handle&gt;</code> part is ever shown in dashboards or logs; the secret is stored only as a hash, so keep the key you receive safe.</p>
<ul>
<li>Send the key on every request in the <code>Authorization</code> header: <code>Authorization: Bearer &lt;API_KEY&gt;</code>.</li>
<li>Never put a key in a URL or in client-side code (browser or mobile app): call the API from your servers.</li>
<li>You may hold several active keys at once. To rotate, request a new key, switch your systems to it, then have the old key revoked. Revocation takes effect on the next request.</li>
<li>A missing, malformed, unknown, revoked or disabled key is <code>401 unauthorized</code> with one generic message and a <code>WWW-Authenticate: Bearer</code> header.</li>
</ul>
</section>

<section id="first-call">
<h2>Your first call</h2>
<p><code>GET /v1/account</code> needs no permission and tells you who you are, which permissions and channels you hold and your rate limits:</p>
<pre><code>curl -sS "$BASE_URL/v1/account" \\
  -H "Authorization: Bearer $API_KEY"</code></pre>
<p>A successful answer is <code>200</code> with a body like this (values are illustrative):</p>
<pre><code>${escapeHtml(sampleAccount())}</code></pre>
<p><code>permissions</code> lists every permission, granted (<code>true</code>) or not. <code>allowed_channels</code> are the light channels you may command across your whole scope.</p>
</section>

<section id="permissions">
<h2>Permissions and scope</h2>
<p>Each partner holds independent boolean permissions; none implies another. Permissions are checked before the rest of the request (right after your key and request rate limit: also before a body that is too large, compressed or of another media type, a header sent twice or a malformed query string), so a granted permission can still be followed by another refusal. A request lacking a needed permission, or targeting a channel, command or setting you are not permitted, is <code>403 forbidden</code>; when a missing permission causes it, the body names it in <code>required_permission</code>.</p>
<p>A device is visible to you only if it sits in an organization subtree granted to you, or you hold <code>access_all_devices</code>. A device outside your scope answers <code>404 not_found</code>, exactly like a device that does not exist. Destructive operations (destructive system verbs, connection/identity settings writes, device removal, energy reset) also need <code>confirm</code> equal to the device id.</p>
<table>
<thead><tr><th scope="col">Permission</th><th scope="col">Grants</th></tr></thead>
<tbody>
${permissionRows}
</tbody>
</table>
</section>

<section id="responses">
<h2>Response conventions</h2>
<table>
<thead><tr><th scope="col">Status</th><th scope="col">Meaning</th></tr></thead>
<tbody>
${row(['<code>200</code>', 'Content returned.'])}
${row(['<code>201</code>', 'Created; the <code>Location</code> header names it.'])}
${row(['<code>202</code>', 'Accepted: a command handed to the broker, or a job started; <code>Location</code> names what to poll when there is something to poll.'])}
${row(['<code>204</code>', 'Done, no body (rename, move, update, removal).'])}
</tbody>
</table>
<p>Ignore response fields you do not recognise: new ones may be added.</p>
<h3 id="requests">Requests</h3>
<p>These rules hold on every route:</p>
<ul>
<li>Send request bodies as JSON objects with <code>Content-Type: application/json</code> (no charset, or <code>charset=utf-8</code>); any other media type or charset is <code>415 unsupported_media_type</code>. A body that is not valid UTF-8, not valid JSON, not an object, or nested more than ${MAX_BODY_DEPTH} levels is <code>400 validation_error</code>.</li>
<li>Routes whose fields are all optional, and routes that take no body, accept none: an empty body or <code>{}</code> is the same as none, and any field in a body they do not take is <code>400 validation_error</code>.</li>
<li>Send bodies uncompressed: a <code>Content-Encoding</code> other than <code>identity</code> is <code>415 unsupported_media_type</code>.</li>
<li>Send <code>Content-Type</code>, <code>Content-Encoding</code>, <code>Content-Length</code> and <code>Idempotency-Key</code> at most once each; a second one is <code>400 validation_error</code>. Two <code>Authorization</code> headers are a malformed key: <code>401 unauthorized</code>.</li>
<li>Text never contains U+0000 or a lone surrogate, anywhere (path, query, body values and field names). Names (device names, organizations, command names, time zones) and raw light command payloads contain no control characters at all (U+0001–U+001F, U+007F). The payload of a raw MQTT publish is not a name: it may hold them, except on a <code>sys/exe</code> topic, where it is one command line. Otherwise <code>400 validation_error</code> naming the field.</li>
<li>Query strings are percent-encoded UTF-8. Give each parameter once. Integers are plain decimal digits (<code>16</code>, or <code>-3</code> where negative values make sense; never <code>0x10</code>, <code>1e1</code> or <code>+16</code>); booleans are <code>true</code> or <code>false</code>.</li>
<li>Date/time query parameters take ISO 8601 date-times (no offset means UTC) or epoch seconds, within ${inlineCode(TIME_RANGE_TEXT)}: a calendar date alone (its midnight) or with a time and an optional offset (${inlineCode('Z')}, ${inlineCode('±hh')}, ${inlineCode('±hh:mm')} or ${inlineCode('±hhmm')}), e.g. ${inlineCode('2026-11-25T10:00:00Z')} or ${inlineCode('20261125T100000Z')}; week and ordinal dates are refused.</li>
<li>A request that is not valid HTTP is <code>400 validation_error</code>; a request line and headers over 16 KB are <code>431 headers_too_large</code>. These answers carry the error body and <code>X-Request-Id</code> like every other.</li>
</ul>
<h3>Headers</h3>
<table>
<thead><tr><th scope="col">Header</th><th scope="col">When</th><th scope="col">Meaning</th></tr></thead>
<tbody>
${row(['<code>X-Request-Id</code>', 'Every response', 'Identifies the request; equals <code>request_id</code> in an error body. Quote it when you contact support.'])}
${row(['<code>Cache-Control: no-store</code>', 'Every <code>/v1</code> response', 'Answers are never cached.'])}
${row(['<code>RateLimit-Limit</code>, <code>RateLimit-Remaining</code>, <code>RateLimit-Reset</code>', 'Every response to an authenticated request', 'Your per-partner request limit; see <a href="#rate-limits">Rate limits</a>.'])}
${row(['<code>Location</code>', '201, and 202 when there is something to poll', 'What was created, or what to poll.'])}
${row(['<code>Idempotent-Replayed: true</code>', 'A replayed response', 'See <a href="#idempotency">Idempotency</a>.'])}
${row(['<code>Retry-After</code>', '429, 409 <code>idempotency_in_progress</code>, 503', 'Seconds to wait before retrying.'])}
${row(['<code>WWW-Authenticate</code>', '401', '<code>Bearer realm=…</code>, with <code>error=invalid_token</code> when a bearer key was sent (not for another scheme such as <code>Basic</code>, nor for <code>Bearer</code> with nothing after it).'])}
${row(['<code>Deprecation</code>, <code>Sunset</code>, <code>Link</code>', 'A request that used a deprecated feature', 'See <a href="#versioning">Versioning</a>.'])}
${row(['<code>Content-Encoding: gzip</code>, <code>Vary: Accept-Encoding</code>', `A JSON answer of ${COMPRESS_FROM_BYTES / 1024} KB or more`, 'Sent gzip-compressed when your request’s <code>Accept-Encoding</code> prefers <code>gzip</code> to <code>identity</code> (most HTTP clients send it and decompress for you; <code>curl --compressed</code> does); otherwise uncompressed. <code>Vary</code> says the form depends on that header. A page of 1,000 meter records shrinks several times over.'])}
</tbody>
</table>
</section>

<section id="errors">
<h2>Errors</h2>
<p>Every error has the same body:</p>
<pre><code>${escapeHtml(SAMPLE_ERROR)}</code></pre>
<ul>
<li><code>error</code>: a sentence for people; it may be reworded, so never parse it.</li>
<li><code>code</code>: a stable word to branch on.</li>
<li><code>request_id</code>: the same value as the <code>X-Request-Id</code> header.</li>
<li><code>required_permission</code>: only on a 403 that this permission would lift; never on a 404.</li>
</ul>
<p class="note">New codes may be added. Handle a code you do not know by its HTTP status.</p>
<table>
<thead><tr><th scope="col">HTTP</th><th scope="col">Code</th><th scope="col">Meaning</th></tr></thead>
<tbody>
${errorRows}
</tbody>
</table>
</section>

<section id="rate-limits">
<h2>Rate limits</h2>
<table>
<thead><tr><th scope="col">Limit</th><th scope="col">Rule</th></tr></thead>
<tbody>
${row(['Requests', 'Per partner, per minute: by default 600, configurable by staff. Your value is <code>rate_limits.requests_per_min</code> in <code>GET /v1/account</code>. Every request counts, including idempotent replays.'])}
${row(['Device commands', 'Per device, per minute, for your account: by default 60, configurable by staff. Your value is <code>rate_limits.device_commands_per_min</code>. A global per-device ceiling shared by all partners also applies.'])}
${row(['Configuration mutations', 'A separate per-partner throttle, by default 30 per minute, shared by every change to a device’s configuration or to your profiles and signals: rename, organization move, sensor changes, profile and alert-signal writes, a light’s alert signal and its automation switch.'])}
${row(['Destructive operations', 'One per-partner, per-hour ceiling shared by destructive system verbs, connection/identity settings writes, device removal and energy reset.'])}
${row(['Live reading', 'At most one request per meter every 10 seconds, whoever asks.'])}
</tbody>
</table>
<p>Every response to an authenticated request carries <code>RateLimit-Limit</code> (your requests per minute), <code>RateLimit-Remaining</code> (requests the current minute still admits) and <code>RateLimit-Reset</code> (seconds until the oldest counted request leaves the minute). Exceeding any limit is <code>429 rate_limited</code> with <code>Retry-After</code> in seconds; on the per-partner request limit <code>RateLimit-Remaining</code> is 0. Wait at least <code>Retry-After</code> seconds before retrying.</p>
</section>

<section id="idempotency">
<h2>Idempotency</h2>
<p>Operations marked with the <code>Idempotency-Key</code> header in the <a href="${ref}">reference</a> accept it, so a retry after a timeout or a lost connection never does the work twice:</p>
<pre><code>curl -sS -X POST "$BASE_URL/v1/devices/0A1B2C3D4E5F/commands" \\
  -H "Authorization: Bearer $API_KEY" \\
  -H "Content-Type: application/json" \\
  -H "Idempotency-Key: 3c9e6f0a-order-1234" \\
  -d '{"channel": "light2", "payload": "&lt;payload&gt;"}'</code></pre>
<ul>
<li>The key is printable ASCII (0x21–0x7E), 1 to 255 characters, and is scoped to your account and the route.</li>
<li>The same request with the same key within 24 hours returns the first response (status and body) again with <code>Idempotent-Replayed: true</code>; nothing is redone. A replay is not re-checked against your current permissions; it counts toward the request rate limit but not toward device command limits.</li>
<li>The same key with a different request is <code>422 idempotency_key_reused</code>. A repeat while the first request still runs is <code>409 idempotency_in_progress</code> with <code>Retry-After</code>.</li>
<li>Only 2xx responses are kept: after a failure, the same key runs the request again.</li>
<li>A request that did its work always answers what it did. In the rare case the service cannot keep that answer for replay (its store failed at that moment), the key stays taken for a minute (<code>409 idempotency_in_progress</code>) and then free: a retry in that minute never repeats the work.</li>
<li>The multipart file upload does not accept a key. A replayed provisioning returns the generated password again. The file push remembers a key for as long as the transfer exists and, after 24 hours, answers <code>200</code> with the transfer's current state.</li>
</ul>
</section>

<section id="cursors">
<h2>Cursors</h2>
<p>Lists that page use cursors. Pass the answer's <code>next_cursor</code> back as the <code>cursor</code> query parameter; <code>has_more</code> says whether another page waits. Cursors are opaque and URL-safe: store and send them as they are, never build or edit one.</p>
</section>

<section id="light-commands">
<h2>Light commands and effects</h2>
<p>A light takes commands on each of its channels in two ways. A <em>raw command</em> (<code>POST /v1/devices/{device_id}/commands</code>, permission <code>raw_commands</code>) sends a wire payload as you write it. A <em>predefined effect</em> (<code>POST /v1/devices/{device_id}/channels/{channel}/effects</code>, permission <code>predefined_commands</code>) names a command of the standard catalog with its parameters, and the platform checks them and writes the payload for you.</p>
<p>With <code>predefined_commands</code> your account has every command of the catalog, with the catalog's parameter bounds, as soon as it holds the permission. <code>GET /v1/commands</code> lists them: for each command, the channels it runs on that you may command, and for each numeric parameter your <code>min</code>, <code>max</code>, <code>default</code> and <code>step</code> (a value must be a whole multiple of it):</p>
<pre><code>curl -sS "$BASE_URL/v1/commands" -H "Authorization: Bearer $API_KEY"</code></pre>
<pre><code>{"commands": [
  {"name": "pulse", "description": "A color pulsing once per period.", "channels": ["light1", "light2", "light3"],
   "parameters": [
     {"name": "color", "type": "color", "default": "0000FF", …},
     {"name": "period_s", "type": "number", "unit": "s", "min": 0.1, "max": 9.999, "default": 1, "step": 0.001, …},
     {"name": "duration_s", "type": "number", "unit": "s", "min": 0.1, "max": 600, "default": 5, "channels": ["light2", "light3"], …},
     …]},
  …]}</code></pre>
<p>Send an effect with the parameters you want; omitted ones take your default. On <code>light2</code> and <code>light3</code> an effect is a repeating overlay: <code>duration_s</code> is how long each occurrence lasts, <code>interval_s</code> how often it repeats (0 plays it once, otherwise at least 10 s).</p>
<pre><code>curl -sS -X POST "$BASE_URL/v1/devices/0A1B2C3D4E5F/channels/light2/effects" \\
  -H "Authorization: Bearer $API_KEY" -H "Content-Type: application/json" \\
  -H "Idempotency-Key: pulse-0A1B2C3D4E5F-0001" \\
  -d '{"command": "pulse", "params": {"color": "FF0000", "period_s": 0.5, "duration_s": 10, "interval_s": 60}}'</code></pre>
<p>The answer is <code>202</code> with <code>{"channel": "light2", "command": "pulse"}</code> once the command is handed to the broker (plus the wire <code>payload</code> when you also hold <code>raw_commands</code>). A parameter that is unknown, of the wrong type or outside your bounds is <code>400 validation_error</code> naming it (for example <code>params.period_s</code>); values are never clamped. A command that does not run on the channel is <code>400</code>; a channel your account may not command is <code>403 forbidden</code>.</p>
<p><strong>Your account's bounds.</strong> Service staff can adjust the catalog for your account, command by command: narrow a parameter's range and default inside the catalog's (never wider), or withdraw a command altogether. A withdrawn command no longer appears in <code>GET /v1/commands</code>, and an effect naming it is <code>403 forbidden</code> without <code>required_permission</code>, since no permission lifts it. Changes apply from your next request, and <code>GET /v1/commands</code> always shows what applies to you now: read your bounds there rather than hard-coding them. Ask your contact to narrow, withdraw or restore a command.</p>
</section>

<section id="alerting">
<h2>Temperature alerting: a worked example</h2>
<p>A light can relay readings of temperature sensors near it (a fridge, a cold room). You attach a sensor to the light with an <em>alert profile</em> (rules over the sensor's recent readings), and choose an <em>alert signal</em> (what <code>light1</code> shows at each level). About every 2 minutes the platform evaluates every attached sensor; at each change of the light's level, and once an hour, it writes the signal's entry for that level to <code>light1</code>. <code>light2</code>, <code>light3</code>, <code>sound</code> and <code>contact</code> are never touched. You need <code>profile_manage</code>, <code>signal_manage</code>, <code>config_write</code> and <code>config_read</code>.</p>
<p><strong>1. A profile.</strong> Rules run in order and the first whose conditions all hold gives the level; none does: the <code>default</code>. This one says: no reading for 15 minutes is stale, above 8 °C three readings in a row is a warning, one reading above 8 °C is an advisory:</p>
<pre><code>curl -sS -X POST "$BASE_URL/v1/profiles" \\
  -H "Authorization: Bearer $API_KEY" -H "Content-Type: application/json" \\
  -d '{"name": "Fridge", "default": "CLEAR", "rules": [
        {"all": [{"metric": "newest_age_secs", "op": "&gt;", "value": 900}], "level": "STALE_DATA"},
        {"all": [{"metric": "latest_temp_c", "op": "&gt;", "value": 8},
                 {"metric": "consecutive_breaches", "op": "&gt;=", "value": 3}], "level": "WARNING"},
        {"all": [{"metric": "latest_temp_c", "op": "&gt;", "value": 8}], "level": "ADVISORY"}]}'</code></pre>
<p>The answer is <code>201</code> with <code>{"id": 7}</code> and <code>Location: /v1/profiles/7</code>. A malformed rule is <code>400 validation_error</code> naming it, e.g. <code>rules[1].all[0].op</code>.</p>
<p><strong>2. A signal</strong> (or use the default one: solid green, solid amber, solid red, pulsing blue when there is no data). Every entry is checked as the light would run it; values are never rounded:</p>
<pre><code>curl -sS -X POST "$BASE_URL/v1/alert-signals" \\
  -H "Authorization: Bearer $API_KEY" -H "Content-Type: application/json" \\
  -d '{"name": "Kitchen", "entries": {
        "CLEAR":    {"light": {"type": "Solid", "color": {"r": 0, "g": 128, "b": 0}}},
        "ADVISORY": {"light": {"type": "Solid", "color": {"r": 255, "g": 191, "b": 0}}},
        "WARNING":  {"light": {"type": "Pulse", "color": {"r": 255, "g": 0, "b": 0}, "period_s": 0.5}},
        "NO_DATA":  {"light": {"type": "Solid", "color": {"r": 0, "g": 0, "b": 64}}}}}'</code></pre>
<p><strong>3. Attach the sensor and choose the signal</strong> on the light (<code>0A1B2C3D4E5F</code>, sensor <code>fridge.1</code> as the light relays it):</p>
<pre><code>curl -sS -X POST "$BASE_URL/v1/devices/0A1B2C3D4E5F/sensors" \\
  -H "Authorization: Bearer $API_KEY" -H "Content-Type: application/json" \\
  -d '{"tdl_id": "fridge.1", "profile_id": 7}'
curl -sS -X PUT "$BASE_URL/v1/devices/0A1B2C3D4E5F/alert-signal" \\
  -H "Authorization: Bearer $API_KEY" -H "Content-Type: application/json" \\
  -d '{"alert_signal_id": 12}'</code></pre>
<p><strong>4. Watch it work.</strong> While the fridge stays cold, <code>light1</code> is solid green. When three readings in a row are above 8 °C, the next evaluation moves the light to WARNING and <code>light1</code> pulses red; when the sensor falls silent for 15 minutes it shows the NO_DATA entry. <code>GET /v1/devices/0A1B2C3D4E5F/config</code> shows the sensors with their profiles and the chosen signal. A profile change takes effect at the next evaluation; a signal change reaches the light at its next level change or within the hour.</p>
<p><strong>Your own <code>light1</code> commands.</strong> Automation overwrites <code>light1</code> at its next write. To show something else on <code>light1</code> for a while, suspend automation with <code>PUT /v1/devices/{device_id}/automation</code> <code>{"enabled": false}</code> (permission <code>automation_control</code>); the level is still evaluated, and the pending entry is written as soon as you enable it again.</p>
<p>Limits: 50 own profiles and 50 own signals (<code>403 limit_reached</code>), 20 rules of up to 8 conditions each (a rule with an empty <code>all</code> always holds; with <code>is_null</code> and <code>not_null</code> a <code>value</code> is ignored and reads back <code>null</code>); names are unique (<code>409 name_taken</code>); a profile still used by a sensor cannot be deleted (<code>409 in_use</code> with the count); deleting a signal in use returns its lights to the default signal. Configuration changes share a separate throttle of 30 per minute.</p>
</section>

<section id="files">
<h2>System interface and file push: a worked example</h2>
<p>Every device runs system verbs (<code>query</code>, <code>reboot</code>, settings writes, file verbs, and destructive ones that need <code>system_destructive</code> and <code>confirm</code> equal to the device id); <code>GET /v1/system/commands</code> lists them with the settings catalog. Commands are fire-and-forget: a 202 carries the exact line published, and the device's acknowledgement (that line followed by <code>&gt;ok</code>, <code>&gt;failed</code>, <code>&gt;applied</code> or <code>&gt;unknown</code>) arrives in the response feed. This example puts a sound on a light. You need <code>file_upload</code>, <code>system_control</code> and <code>system_read</code>.</p>
<p><strong>1. Upload the sound.</strong> A multipart upload into <code>files/</code>; the answer carries its SHA-256 and an audio check (best: mono MP3, 16 kHz, 48 kbps constant bitrate, no tags). A name that exists is <code>409 conflict</code>: uploads never overwrite.</p>
<pre><code>curl -sS -X POST "$BASE_URL/v1/system/files" \\
  -H "Authorization: Bearer $API_KEY" \\
  -F dir=files -F file=@doorbell.mp3</code></pre>
<pre><code>{"dir": "files", "name": "doorbell.mp3", "size": 21600, "sha256": "9f2c…",
 "audio": {"playable": true, "ideal": true, "fixable": true, "summary": {"format": "MPEG-2 Layer III", "sample_rate_hz": 16000, "channel_mode": "mono", "bitrate_kbps": 48, …}, "issues": []}}</code></pre>
<p><strong>2. Push it to the light.</strong> Send an <code>Idempotency-Key</code> so a retry never pushes twice (the key is remembered as long as the transfer exists):</p>
<pre><code>curl -sS -X POST "$BASE_URL/v1/devices/0A1B2C3D4E5F/files" \\
  -H "Authorization: Bearer $API_KEY" -H "Content-Type: application/json" \\
  -H "Idempotency-Key: push-doorbell-0A1B2C3D4E5F" \\
  -d '{"name": "doorbell.mp3", "dest": "bell.mp3"}'</code></pre>
<pre><code>202 Accepted
Location: /v1/devices/0A1B2C3D4E5F/files/xf_3a9e…
{"transfer_id": "xf_3a9e…", "device_id": "0A1B2C3D4E5F", "state": "sent", "terminal": false, "src": "files/doorbell.mp3", "dest": "bell.mp3",
 "sha256": "9f2c…", "attempts": 1, "detail": null, "device_online": true, "poll_after_s": 5,
 "timeline": {"created_at": "…", "sent_at": "…", "ack_deadline": "…", "settled_at": null}, "note": "…"}</code></pre>
<p><strong>3. Poll until <code>terminal</code>.</strong> The device downloads the file from a signed URL, checks its SHA-256 and acknowledges. <code>succeeded</code>: it has the file. <code>failed</code>: <code>detail</code> says why (for example a SHA-256 mismatch). <code>timed_out</code>: no answer before <code>timeline.ack_deadline</code>; the acknowledgement can be lost while the device reconnects, so read <code>GET /v1/devices/{device_id}/system/settings</code> and look for the file in <code>file_list</code> before trying again. Wait <code>poll_after_s</code> between polls; your client's timeout must exceed the deadline.</p>
<pre><code>curl -sS "$BASE_URL/v1/devices/0A1B2C3D4E5F/files/xf_3a9e…" -H "Authorization: Bearer $API_KEY"
curl -sS "$BASE_URL/v1/devices/0A1B2C3D4E5F/files?state=failed" -H "Authorization: Bearer $API_KEY"</code></pre>
<p><strong>Settings.</strong> <code>PUT /v1/devices/{device_id}/system/settings/volume</code> <code>{"value": 40}</code> publishes <code>set&gt;volume=40</code>; it applies at the next reboot. A secret key (one containing <code>pass</code>, <code>pwd</code>, <code>key</code>, <code>token</code>, <code>secret</code> or <code>psk</code>) is sealed for the device: the 202 and the acknowledgement carry <code>enc1:…</code>, never your value; when the device cannot open it the answer is <code>409 encryption_unavailable</code> and nothing is sent. Connection and identity keys (<code>mqttUser</code>, <code>mqttPass</code>, <code>devId</code>, <code>topicRoot</code>, <code>host</code>, <code>tlsMode</code>, <code>mqttPort</code>, <code>caCertFile</code>) are destructive.</p>
<p><strong>The response feed.</strong> <code>GET /v1/devices/{device_id}/system/responses</code> returns the last ten minutes oldest first, or rows from <code>since</code>; keep the <code>next_cursor</code> and pass it back as <code>cursor</code>: a cursor never skips a row.</p>
</section>

<section id="push-events">
<h2>Push events</h2>
<p>Instead of polling, let the platform tell you when something happens to your devices: a light connects or disconnects, a device is provisioned, moved or removed, an alert level changes, a device acknowledges a command, a file transfer settles, meter records arrive. Events come two ways: <strong>webhooks</strong> (the platform POSTs each event to your HTTPS endpoint; permission <code>webhook_manage</code> to manage them) and the <strong>live stream</strong> (<code>GET /v1/events</code>, Server-Sent Events; permission <code>events_read</code>). Both carry the same events in the same envelope.</p>
<h3 id="event-envelope">The event</h3>
<pre><code>${escapeHtml(SAMPLE_EVENT)}</code></pre>
<ul>
<li><code>id</code>: <code>evt_</code> and 32 hexadecimal characters, the same wherever and however often the event reaches you: deduplicate on it.</li>
<li><code>type</code>: one of the types below; <code>version</code>: the version of its <code>data</code> (1). A type's <code>data</code> may gain fields (ignore the ones you do not know); a change that removes or retypes one comes as a new version.</li>
<li><code>occurred_at</code>: when it happened; <code>device_id</code>: the device it is about; <code>data</code>: what happened (its schema per type is in the <a href="${ref}">reference</a>, section Webhooks).</li>
</ul>
<h3 id="event-types">Types and permissions</h3>
<table>
<thead><tr><th scope="col">Type</th><th scope="col">Permission to receive it</th><th scope="col">Meaning</th></tr></thead>
<tbody>
${eventRows}
</tbody>
</table>
<p><strong>Who receives what.</strong> You receive an event when its device was in your scope at the time of the event, and only of the types your permissions allow (a key without <code>energy_read</code> receives no <code>meter.records_stored</code>, even on an endpoint that subscribes to it). A change to your permissions or organization grants takes effect within 5 seconds; deliveries still pending when a permission they need is withdrawn are not sent (they end <code>dead</code>). A stream resumed with <code>Last-Event-ID</code> replays the events your permissions and grants admit now, each judged by where its device was when it happened: a device moved into your scope brings none of its earlier events, and one moved out keeps those from its time with you.</p>
<h3 id="webhooks">Webhooks</h3>
<p><strong>1. Create an endpoint</strong> with the types it wants (send an <code>Idempotency-Key</code> so a retry does not create two):</p>
<pre><code>curl -sS -X POST "$BASE_URL/v1/webhooks" \\
  -H "Authorization: Bearer $API_KEY" -H "Content-Type: application/json" \\
  -H "Idempotency-Key: webhook-ops-1" \\
  -d '{"url": "https://hooks.example.com/fleet-events", "event_types": ["device.connected", "device.disconnected"], "description": "Ops board"}'</code></pre>
<pre><code>201 Created
Location: /v1/webhooks/wh_0c9a…
{"id": "wh_0c9a…", "url": "https://hooks.example.com/fleet-events", "event_types": ["device.connected", "device.disconnected"],
 "description": "Ops board", "enabled": true, "created_at": "…", "updated_at": "…", "secret": "whsec_…"}</code></pre>
<p>The <code>secret</code> is shown only in this answer: store it now. <code>GET /v1/webhooks</code> lists your endpoints, <code>PATCH /v1/webhooks/{webhook_id}</code> changes any of <code>url</code>, <code>event_types</code>, <code>description</code> and <code>enabled</code>, <code>DELETE</code> removes one (its pending deliveries are dropped).</p>
<p><strong>2. Verify every delivery.</strong> Each one is a <code>POST</code> of the event as JSON with the Standard Webhooks headers (standardwebhooks.com) <code>webhook-id</code> (the event's <code>id</code>), <code>webhook-timestamp</code> (Unix seconds) and <code>webhook-signature</code> (<code>v1,</code> and the base64 HMAC-SHA256 of <code>&lt;webhook-id&gt;.&lt;webhook-timestamp&gt;.&lt;body&gt;</code>, keyed with the base64-decoded part of the secret after <code>whsec_</code>). The <code>standardwebhooks</code> npm package checks all of it, the timestamp included; verify the body exactly as received, before parsing it. With Express:</p>
<pre><code>${escapeHtml(VERIFY_EXAMPLE)}</code></pre>
<p><code>verify</code> throws unless one signature matches and the timestamp is within 5 minutes of your clock, and returns the event; <code>handle</code> is yours: queue the event and return.</p>
<p><strong>3. Answer fast.</strong> A <code>2xx</code> within 10 seconds is success. Anything else, a redirect, a timeout or a refused connection included, is a failure and the delivery is tried again: ${RETRY_SCHEDULE.length} attempts in all, ${escapeHtml(RETRY_SCHEDULE[0])}, then after ${RETRY_SCHEDULE.slice(1).map((d) => escapeHtml(d)).join(', ')} (about 2.6 days); after the last failure the delivery is <code>dead</code>. Deliveries are at least once, so the same event can arrive twice: deduplicate on <code>webhook-id</code>. Per endpoint, the events of one device are sent one at a time, each once the one before it succeeded or was given up, in the order the platform took them up: the order they happened, but for two events of a device close together when the platform had to take one up again (a failure between its services) or took both up at once. Where order matters, compare <code>occurred_at</code>. Queue the work and answer at once.</p>
<p><strong>Rotate the secret</strong> with <code>POST /v1/webhooks/{webhook_id}/rotate-secret</code>, optionally <code>{"previous_expires_in_s": 3600}</code> (0 to 604800; default 86400): the answer holds the new secret and <code>previous_secret_expires_at</code>. Until then each delivery carries two space-separated signatures, one per secret, and the package accepts either: deploy the new secret, and nothing is lost. Retrying a rotation whose answer you lost is safe: a previous secret still signing keeps signing until its own expiry (up to three signatures).</p>
<p><strong>Delivery log.</strong> <code>GET /v1/webhooks/{webhook_id}/deliveries</code> lists an endpoint's deliveries newest first (<code>state</code> = <code>pending</code>, <code>succeeded</code> or <code>dead</code>; <code>limit</code>; <code>cursor</code> from <code>next_cursor</code>) with their attempts: when, your status code, the error, how long it took. <code>POST /v1/webhooks/{webhook_id}/deliveries/{delivery_id}/redeliver</code> sends one again now with a fresh schedule, for example after you fixed your receiver. <code>POST /v1/webhooks/{webhook_id}/test</code> sends a <code>${escapeHtml(WEBHOOK_TEST_TYPE)}</code> event whatever the endpoint subscribes to: use it to check your signature code.</p>
<p><strong>Receivers.</strong> An endpoint must be a public <code>https://</code> URL in production: plain <code>http</code>, URLs with credentials, and hosts that are or resolve to private, loopback or link-local addresses are refused with <code>400 validation_error</code> (the address is checked again at every delivery). A local fleet started with <code>npm start</code>, for development, also accepts plain <code>http</code>, loopback and private receivers such as <code>http://127.0.0.1:3000/fleet-events</code>; link-local and unspecified addresses (<code>169.254.x.x</code>, <code>0.0.0.0</code>) are refused everywhere.</p>
<h3 id="event-stream">The live stream</h3>
<p><code>GET /v1/events</code> answers <code>text/event-stream</code> and stays open: each event is a frame with <code>id:</code> (its position in the stream), <code>event:</code> (its type) and <code>data:</code> (the event as JSON), and a <code>: keep-alive</code> comment comes every 15 seconds. <code>curl -N</code> shows it as it arrives:</p>
<pre><code>curl -N "$BASE_URL/v1/events?types=device.connected,device.disconnected" \\
  -H "Authorization: Bearer $API_KEY"</code></pre>
<pre><code>id: 184467
event: device.disconnected
data: {"id":"evt_5f0c…","type":"device.disconnected","version":1,"occurred_at":"…","device_id":"0A1B2C3D4E5F","data":{…}}

: keep-alive
</code></pre>
<ul>
<li>Filters: <code>types</code> (comma-separated, no spaces; default every type your permissions allow) and <code>device_id</code> (one device in your scope, else <code>404 not_found</code>). An unknown type is <code>400 validation_error</code>.</li>
<li>Resume: after a disconnection reconnect with <code>Last-Event-ID: &lt;the last id you received&gt;</code> (an <code>EventSource</code> does it by itself), or <code>last_event_id=</code> in the query when your client cannot set headers; events after it, within the last 7 days, come first. Without either, the stream starts with new events.</li>
<li>At most ${MAX_OPEN_STREAMS} streams per partner are open at once: one more is <code>429 rate_limited</code> with <code>Retry-After</code>. Opening a stream counts as one request against your rate limit; an open stream has no timeout.</li>
<li>An open stream is held by the key that opened it: revoking that key, disabling your account or withdrawing <code>events_read</code> ends the stream within 5 seconds, and reconnecting is then refused like any request.</li>
<li>Read the stream from your servers, like every API call: never put your key in a browser.</li>
</ul>
<h3 id="event-limits">Limits</h3>
<ul>
<li>${MAX_WEBHOOKS} webhook endpoints per partner (<code>403 limit_reached</code>); ${MAX_OPEN_STREAMS} open streams per partner.</li>
<li>The delivery log keeps 30 days; the stream can be resumed within 7 days.</li>
</ul>
</section>

<section id="versioning">
<h2>Versioning and deprecation</h2>
<ul>
<li>The version is <code>v1</code>, in the path prefix. After launch <code>/v1</code> only gains: new routes, optional parameters, fields and error codes. Ignore fields you do not recognise and handle unknown error codes by HTTP status.</li>
<li>Anything to be removed is deprecated first, with at least six months before its sunset. A response that uses a deprecated feature carries the <code>Deprecation</code>, <code>Sunset</code> and <code>Link</code> (<code>rel="deprecation"</code>) headers, and the operation is marked deprecated in the reference. Watch for these headers in your logs.</li>
<li>Every change is listed in the <a href="${changelog}">changelog</a>.</li>
</ul>
</section>

<section id="more">
<h2>Reference</h2>
<ul>
<li><a href="${ref}">Full API reference</a>: every operation, its permission, parameters, responses and error codes.</li>
<li><a href="${openapi}">OpenAPI 3.1 description</a> (<code>/openapi.json</code>), for code generators and API tools.</li>
<li><a href="${changelog}">Changelog</a>.</li>
</ul>
</section>
</main>
<footer>
<p>Partner Device API v1. Reference document version ${API_DOCUMENT_VERSION}.</p>
</footer>`;

  return page('Partner Device API: quick start', body);
}
