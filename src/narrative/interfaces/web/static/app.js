/* narrative review page: the shared part (key, API calls, DOM helpers, router).
 *
 * The API key lives in sessionStorage (this tab only) and goes out as
 * "Authorization: Bearer <key>" on every fetch.  A key in the URL fragment
 * (#key=..., printed by `narrative serve --open-user NAME`) is moved into
 * sessionStorage and removed from the address bar at once: when the page starts, and when such a link is
 * opened in a tab already on the page (only the fragment changes, so the page hears a hashchange).
 * Everything is built with createElement/textContent: no HTML from data.
 */
"use strict";

const N = (() => {
  const KEY = "narrative.key";
  const routes = {};
  let lastView = null;
  let flash = null; // a message to show after the next view change

  class ApiError extends Error {
    constructor(status, message, body) {
      super(message);
      this.status = status;
      this.body = body;
    }
  }

  function key() {
    return sessionStorage.getItem(KEY);
  }

  function takeKeyFromFragment() {
    const match = location.hash.match(/^#key=([A-Za-z0-9_\-]+)/);
    if (!match) return false;
    sessionStorage.setItem(KEY, match[1]);
    history.replaceState(null, "", location.pathname + location.search + "#/review");
    return true;
  }

  async function onHashChange() {
    if (takeKeyFromFragment()) {  // a new key (perhaps another user's): sign in with it, then show the review
      try {
        await signIn();
      } catch (error) {
        failed(error);
        return;
      }
      lastView = null;
    }
    await dispatch();
  }

  async function api(method, path, body) {
    const headers = { Authorization: "Bearer " + key(), Accept: "application/json" };
    const init = { method, headers };
    if (body !== undefined) {
      headers["Content-Type"] = "application/json";
      init.body = JSON.stringify(body);
    }
    const response = await fetch("/api/v1" + path, init);
    const text = await response.text();
    let data = null;
    if (text) {
      try { data = JSON.parse(text); } catch (_) { data = text; }
    }
    if (response.status === 401) {
      signOut("That key was not accepted. Enter another one.");
      throw new ApiError(401, "unauthorized", data);
    }
    if (!response.ok) {
      const message = (data && data.message) || response.statusText || "request failed";
      throw new ApiError(response.status, message, data);
    }
    return data;
  }

  const get = (path) => api("GET", path);
  const post = (path, body) => api("POST", path, body === undefined ? {} : body);
  const patch = (path, body) => api("PATCH", path, body);
  const del = (path) => api("DELETE", path);

  /* el("li", {class: "x", href: "#/a"}, "text", childNode, ...) */
  function el(tag, attrs, ...children) {
    const node = document.createElement(tag);
    for (const [name, value] of Object.entries(attrs || {})) {
      if (value === null || value === undefined || value === false) continue;
      if (name === "text") node.textContent = value;
      else if (name === "onclick") node.addEventListener("click", value);
      else node.setAttribute(name, value === true ? "" : String(value));
    }
    for (const child of children.flat(Infinity)) {
      if (child === null || child === undefined || child === false) continue;
      node.append(child instanceof Node ? child : document.createTextNode(String(child)));
    }
    return node;
  }

  function $(id) {
    return document.getElementById(id);
  }

  function fill(id, ...children) {
    const node = $(id);
    node.replaceChildren(...children.flat(Infinity).filter((c) => c !== null && c !== undefined));
    return node;
  }

  function say(text, kind) {
    const box = $("status");
    box.textContent = text || "";
    box.className = "status" + (kind ? " " + kind : "");
  }

  /* Say it after the navigation that is about to happen (a view change clears the status line). */
  function sayNext(text, kind) {
    flash = [text, kind];
  }

  function failed(error) {
    if (error && error.status === 401) return;
    say(error && error.message ? "Error: " + error.message : "Something went wrong.", "error");
  }

  function when(iso) {
    if (!iso) return "";
    const d = new Date(iso);
    if (Number.isNaN(d.getTime())) return String(iso);
    const pad = (n) => String(n).padStart(2, "0");
    return `${d.getFullYear()}-${pad(d.getMonth() + 1)}-${pad(d.getDate())} ${pad(d.getHours())}:${pad(d.getMinutes())}`;
  }

  function stars(n) {
    const count = Math.max(0, Math.min(5, Number(n) || 0));
    return el("span", { class: "stars", title: `importance ${count} of 5`, "aria-label": `importance ${count} of 5` },
      "★".repeat(count) + "☆".repeat(5 - count));
  }

  /* ----- routing: #/view/arg?query ----- */

  function route(name, handler) {
    routes[name] = handler;
  }

  function parseHash() {
    const raw = location.hash.replace(/^#\/?/, "");
    const [path, query] = raw.split("?");
    const parts = path.split("/").filter(Boolean).map(decodeURIComponent);
    return { view: parts[0] || "review", args: parts.slice(1), query: new URLSearchParams(query || "") };
  }

  function show(view) {
    for (const section of document.querySelectorAll(".view")) section.hidden = section.id !== "view-" + view;
    for (const link of document.querySelectorAll("#nav a")) {
      if (link.dataset.view === view) link.setAttribute("aria-current", "page");
      else link.removeAttribute("aria-current");
    }
  }

  /* The tab's title names what is shown: the view's heading (set by the view), then the product. */
  function entitle(text) {
    document.title = text ? `${text} — narrative` : "narrative — memory review";
  }

  let dispatching = 0; // the latest navigation; an older one that finishes later changes nothing

  function notFound(what) {
    show("notfound");
    fill("notfound-what", what);
    return "notfound";
  }

  async function dispatch() {
    if (!key()) return showLogin();
    const { view, args, query } = parseHash();
    let target = routes[view] ? view : notFound(`There is no page at “#/${[view, ...args].join("/")}”.`);
    const moved = lastView !== location.hash;
    lastView = location.hash;
    say(...(flash || [""]));
    flash = null;
    const token = ++dispatching;
    let viewName = null; // a view may return what it shows, when more precise than its heading
    if (routes[view]) {
      show(target);
      try {
        const named = await routes[view](args, query);
        if (typeof named === "string") viewName = named;
      } catch (error) {
        if (token !== dispatching) return;
        if (error && error.status === 404) target = notFound(error.message);
        else failed(error);
      }
    }
    if (token !== dispatching) return;
    const heading = document.querySelector(`#view-${target} h1`);
    entitle(target === "notfound" ? "Not found" : viewName || (heading && heading.textContent));
    if (moved) {
      if (heading && !document.activeElement.closest(`#view-${target} form`)) heading.focus();
    }
  }

  /* ----- signing in and out ----- */

  function showLogin(message) {
    entitle("Open your memory");
    $("login").hidden = false;
    $("nav").hidden = true;
    $("who").hidden = true;
    for (const section of document.querySelectorAll(".view")) section.hidden = true;
    if (message) say(message, "error");
    $("key-input").focus();
  }

  function signOut(message) {
    sessionStorage.removeItem(KEY);
    showLogin(message);
  }

  async function signIn() {
    const me = await get("/me");
    $("login").hidden = true;
    $("nav").hidden = false;
    $("who").hidden = false;
    $("who-name").textContent = "Signed in as " + me.user;
    return me;
  }

  async function start() {
    takeKeyFromFragment();
    $("login-form").addEventListener("submit", async (event) => {
      event.preventDefault();
      const value = $("key-input").value.trim();
      if (!value) return;
      sessionStorage.setItem(KEY, value);
      $("key-input").value = "";
      try {
        await signIn();
        lastView = null;
        await dispatch();
      } catch (error) {
        failed(error);
      }
    });
    $("signout").addEventListener("click", () => signOut("Key forgotten for this tab."));
    window.addEventListener("hashchange", onHashChange);
    if (!key()) return showLogin();
    try {
      await signIn();
    } catch (error) {
      failed(error);
      return;
    }
    await dispatch();
  }

  return { api, get, post, patch, del, el, $, fill, say, sayNext, failed, when, stars, route, dispatch, start,
    entitle, ApiError };
})();
