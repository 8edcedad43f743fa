// Drives Debian's Chromium (headless, fake microphone) through one story and writes what it
// saw to OUT/result.json (and OUT/page.png) for the Go test to check. Run by go test ./web/
// (browser_test.go); by hand, against a running broker:
//
//   CHROMIUM=/usr/bin/chromium PAGE_URL='http://127.0.0.1:8080/?session=…&token=…' STORY=deferred OUT=/tmp/x node story.mjs
//
// The stories of the try-it page:
//   deferred   join over WebRTC, make the model call book_table, answer its decision with the
//              page's button, see the job complete and its completion voiced, hang up.
//   resume     create a session with the API key, start the job, close the peer connection
//              mid-job, see the SDK resume (tool_deferred_resume) and the job finish after it.
//   websocket  join over WebSocket (typing as the caller, agent audio as messages), resolve the
//              decision from the host side, complete the job with "Complete now".
// and of the SDK's README:
//   readme     run the README's example (a page the test serves), answer its question as the
//              caller, and see the job it deferred finish.
import { chromium } from "playwright-core";
import { mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import path from "node:path";

const executablePath = process.env.CHROMIUM || "/usr/bin/chromium";
const pageURL = must("PAGE_URL");
const story = must("STORY");
const out = must("OUT");

function must(name) {
  const v = process.env[name];
  if (!v) {
    console.error(`story.mjs: set ${name}`);
    process.exit(2);
  }
  return v;
}

const started = Date.now();
const log = (...a) => console.error(`[${((Date.now() - started) / 1000).toFixed(1)}s]`, ...a);
const result = { story, steps: [], consoleErrors: [] };

/** A mono 16-bit WAV of `seconds` of faint noise (amplitude ±30 of 32767, far below the VAD threshold). */
function roomNoise(rate, seconds) {
  const n = rate * seconds;
  const b = Buffer.alloc(44 + 2 * n);
  b.write("RIFF", 0);
  b.writeUInt32LE(36 + 2 * n, 4);
  b.write("WAVEfmt ", 8);
  b.writeUInt32LE(16, 16);
  b.writeUInt16LE(1, 20); // PCM
  b.writeUInt16LE(1, 22); // mono
  b.writeUInt32LE(rate, 24);
  b.writeUInt32LE(2 * rate, 28);
  b.writeUInt16LE(2, 32);
  b.writeUInt16LE(16, 34);
  b.write("data", 36);
  b.writeUInt32LE(2 * n, 40);
  let x = 1;
  for (let i = 0; i < n; i++) {
    x = (x * 1103515245 + 12345) % 2147483648; // deterministic
    b.writeInt16LE(Math.round(((x / 2147483648) * 2 - 1) * 30), 44 + 2 * i);
  }
  return b;
}

/** The try-it page's stories. */
async function pageStory(page, step) {
  await step("open the page", () => page.goto(pageURL));
  result.prefilled = {
    sessionId: await page.inputValue("#session-id"),
    apiKey: await page.inputValue("#api-key"),
    mode: await page.locator('input[name="mode"]:checked').getAttribute("value"),
  };
  await step(story === "websocket" ? "connect over WebSocket" : "connect over WebRTC with the fake microphone", async () => {
    await page.click("#connect");
    await page.waitForSelector('#status[data-state="open"]');
  });
  result.audioBytesAtConnect = await page.evaluate(() => window.backchannelPage.audioBytesReceived());

  const party = { deferred: 4, resume: 2, websocket: 3 }[story];
  await step(`say: call book_table {"party":${party}}`, async () => {
    await page.fill("#say-text", `call book_table {"party":${party}}`);
    await page.click("#say");
  });
  const job = await step("the page defers the call", async () => {
    const li = page.locator('.job[data-state="deferred"]').first();
    await li.waitFor();
    return { callId: await li.getAttribute("data-call-id"), handle: await li.getAttribute("data-handle") };
  });
  result.job = job;

  if (story === "resume") {
    await step("close the peer connection mid-job (a drop)", () => page.evaluate(() => window.backchannelPage.dropTransport()));
    await step("the SDK reconnects and resumes", () =>
      page.waitForFunction(() => window.backchannelPage.events.some((e) => e.name === "resumed")));
    await step("tool_deferred_resume lists the job", () =>
      page.waitForFunction((handle) => window.backchannelPage.frames.some((f) =>
        f.dir === "in" && f.frame.type === "tool_deferred_resume" && f.frame.jobs.some((j) => j.handle === handle)), job.handle));
  }

  await step("the decision is asked (its narration delivered)", () =>
    page.waitForSelector('.decision[data-narration-state="delivered"] button[data-option="7:30"]'));
  if (story === "websocket") {
    await step("resolve the decision from the host side", async () => {
      await page.click('.decision button[data-action="resolve"]');
      await page.waitForSelector('.decision[data-closed="true"]');
    });
    await step("complete the job now", () => page.click(`.job[data-call-id="${job.callId}"] button[data-action="complete"]`));
  } else {
    await step("answer 7:30 with the page's button", () => page.click('.decision button[data-option="7:30"]'));
  }
  await step("the page completes the job", () =>
    page.waitForSelector(`.job[data-call-id="${job.callId}"][data-state="completed"]`));
  await step("the completion is voiced", () =>
    page.waitForSelector(`.job[data-call-id="${job.callId}"] .narrations li[data-kind="completion"][data-state="delivered"]`));
  result.audioBytesAfterStory = await page.evaluate(() => window.backchannelPage.audioBytesReceived());
  // Only a page with the join token (one that created its session with the API key) reads the
  // timeline: the caller token of caller_url reaches nothing over HTTP but the signaling.
  if (await page.evaluate(() => Boolean(window.backchannelPage.client.joinToken))) {
    await step("the timeline stream has the result", () =>
      page.waitForFunction((callId) => window.backchannelPage.timeline.some((e) => e.kind === "result" && e.call_id === callId), job.callId));
  }

  await step("screenshot", () => page.screenshot({ path: path.join(out, "page.png"), fullPage: true }));
  await step(story === "websocket" ? "hang up (session.end)" : "hang up (DELETE of the peer connection's resource)", async () => {
    await page.click("#hang-up");
    await page.waitForSelector('#status[data-state="ended"]');
  });
  Object.assign(result, await page.evaluate(() => ({
    frames: window.backchannelPage.frames,
    events: window.backchannelPage.events,
    timeline: window.backchannelPage.timeline,
    status: document.querySelector("#status").textContent,
    sessionId: window.backchannelPage.client.sessionId,
  })));
}

/** The README's example: it logs the conversation to the console (collected in window.readmeLines). */
async function readmeStory(page, step) {
  const said = (text) => page.waitForFunction((t) => window.readmeLines?.includes(t), text);
  await step("open the example", () => page.goto(pageURL));
  await step("the agent asks", () => said("agent: 7:30 or 8:15? Options: 7:30, 8:15."));
  await step("answer as the caller", () => page.evaluate(() => window.client.say("8:15")));
  await step("the job completes and its completion is voiced", () => said('agent: booking your table is done: {"time":"8:15"}'));
  await step("hang up", () => page.evaluate(() => window.client.hangUp()));
  Object.assign(result, await page.evaluate(() => ({
    readmeLines: window.readmeLines, sessionId: window.client.sessionId, state: window.client.state,
  })));
}

const userDataDir = mkdtempSync(path.join(tmpdir(), "backchannel-chromium-"));
// Chromium's fake microphone beeps twice a second, loud enough (~80 ms above the broker's VAD
// threshold) to count as the caller speaking: the floor would never be free and nothing would
// be narrated. The fake device plays this quiet room noise instead (a real, quiet microphone).
const quietWAV = path.join(userDataDir, "quiet-room.wav");
writeFileSync(quietWAV, roomNoise(16000, 2));
let context;
let page;
try {
  context = await chromium.launchPersistentContext(userDataDir, {
    executablePath,
    headless: true,
    viewport: { width: 1280, height: 1100 },
    args: [
      "--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
      "--disable-background-networking", "--disable-component-update", "--disable-sync",
      "--use-fake-device-for-media-stream", "--use-fake-ui-for-media-stream",
      `--use-file-for-fake-audio-capture=${quietWAV}`,
      "--autoplay-policy=no-user-gesture-required",
    ],
    timeout: 30000,
  });
  page = context.pages()[0] ?? (await context.newPage());
  page.setDefaultTimeout(30000);
  page.on("console", (m) => {
    if (m.type() === "error" || m.type() === "warning") result.consoleErrors.push(`${m.type()}: ${m.text()}`);
  });
  page.on("pageerror", (e) => result.consoleErrors.push(`pageerror: ${e.message}`));
  const step = async (name, fn) => {
    log(name);
    const t = Date.now();
    try {
      const v = await fn();
      result.steps.push({ name, ms: Date.now() - t });
      return v;
    } catch (e) {
      const status = await page.locator("#status").textContent({ timeout: 1000 }).catch(() => "?");
      throw new Error(`step "${name}" failed: ${e.message}\npage status: ${status}`);
    }
  };
  await (story === "readme" ? readmeStory(page, step) : pageStory(page, step));
  result.ok = true;
} catch (e) {
  result.ok = false;
  result.error = String(e.stack || e);
  log("FAILED:", e.message);
  try {
    await page?.screenshot({ path: path.join(out, "failure.png"), fullPage: true });
    Object.assign(result, await page?.evaluate(() => ({
      frames: window.backchannelPage?.frames, events: window.backchannelPage?.events,
      status: document.querySelector("#status")?.textContent,
      sessionId: (window.backchannelPage?.client ?? window.client)?.sessionId,
      readmeLines: window.readmeLines,
    })));
  } catch {
    // the page is gone
  }
} finally {
  await context?.close().catch(() => {});
  rmSync(userDataDir, { recursive: true, force: true });
  writeFileSync(path.join(out, "result.json"), JSON.stringify(result, null, 1));
  log(result.ok ? "done" : "failed");
}
process.exit(result.ok ? 0 : 1);
