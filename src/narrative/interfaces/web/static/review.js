/* narrative review page: the review step (Talking Rock) — the preview beside the conversation it came from;
 * confirm, edit, redirect, split (each part with its text, storyline and extracted items), resume. */
"use strict";

(() => {
  const { el, $, fill, get, post, patch, say, sayNext, failed, when, route } = N;
  let reviewing = null; // conversation id under review
  let preview = null;

  function previewFields(p) {
    const destination = p.destination || {};
    const suggestion = p.suggestion || {};
    return {
      narrative: p.narrative || "",
      entities: p.entities || [],
      removed: new Set(p.removed || []),
      deltas: p.deltas || [],
      destination: destination.storyline_id ?? null,
      destinationName: destination.name,
      reason: destination.reason || "",
      suggestion,
    };
  }

  /* What confirming a preview stores, to tell whether the one shown is still the one the server holds. */
  const whatConfirmStores = (p) => JSON.stringify([p.narrative, p.removed, (p.destination || {}).storyline_id,
    p.one_per_topic, (p.parts || []).map((x) => [x.storyline_id, x.narrative, x.entity_keys])]);

  const kept = (p) => { const f = previewFields(p); return f.entities.filter((e) => !f.removed.has(e.key)); };

  function entityText(e) {
    const type = (e.type || e.entity_type || "").replace(/_/g, " ");
    return `${type}: ${e.name}`;
  }

  function deltaText(d) {
    const type = (d.type || d.delta_type || "").replace(/_/g, " ");
    const data = d.data || {};
    const what = data.thread || data.name || data.what || data.description || "";
    return what ? `${type}: ${what}` : type;
  }

  /* keepForms: the same conversation shown again (a second navigation to it, a refresh): a form the person
     opened meanwhile (Edit, Redirect, Split) stays open instead of closing under their cursor. */
  function renderPreview(p, keepForms = false) {
    preview = p;
    const f = previewFields(p);
    $("preview").hidden = false;
    fill("preview-title", p.title ? `Memory from “${p.title}”` : `Memory from conversation #${p.conversation_id}`);
    const restating = (id) => id == null ? null : el("span", { class: "muted" },
      ` (it says no more than memory #${id}, what was said: confirming keeps that memory, no copy)`);
    if (p.one_per_topic) { // two topics: one memory each, in its own storyline
      fill("preview-narrative", el("ul", {}, ...p.parts.map((part) => el("li", {},
        el("strong", {}, `${part.name}: `), part.narrative, restating(part.restates)))));
    } else {
      fill("preview-narrative", f.narrative);
      if (p.user_edited) $("preview-narrative").append(el("span", { class: "muted" }, " (edited by you)"));
      const note = restating(p.restates);
      if (note) $("preview-narrative").append(note);
    }
    const items = kept(p);
    fill("preview-entities", items.length ? items.map((e) => el("li", {}, entityText(e)))
      : [el("li", { class: "muted" }, "nothing extracted")]);
    fill("preview-deltas", f.deltas.length ? f.deltas.map((d) => el("li", {}, deltaText(d)))
      : [el("li", { class: "muted" }, "no new or resolved threads")]);
    const suggested = f.suggestion.storyline_id === f.destination;
    if (p.one_per_topic) fill("preview-destination", "each memory to its topic's storyline ",
      el("span", { class: "muted" }, "(Redirect, or Edit the text, to keep one memory)"));
    else fill("preview-destination", el("strong", {}, f.destinationName || M.storylineName(f.destination)),
      suggested ? " (suggested)" : "", f.reason ? el("span", { class: "muted" }, ` — ${f.reason}`) : null,
      !suggested && f.suggestion.name ? el("span", { class: "muted" }, ` · suggested: ${f.suggestion.name}`) : null);
    if (!keepForms) for (const form of ["edit-form", "redirect-form", "split-form"]) $(form).hidden = true;
  }

  async function renderConversation(id) {
    const [conversation, messages] = await Promise.all([
      get(`/conversations/${id}`), get(`/conversations/${id}/messages?limit=200`),
    ]);
    fill("preview-conversation-about", `Conversation #${conversation.id} · started ${when(conversation.started_at)}` +
      ` · ${conversation.message_count} messages`);
    fill("preview-transcript-title", `The conversation (${messages.items.length} messages)`);
    fill("preview-transcript", messages.items.map(M.transcriptItem));
  }

  async function reviewView(args) {
    await M.loadStorylines();
    const [waiting, active] = await Promise.all([
      get("/conversations?status=ready_to_close&limit=50"), get("/conversations/active"),
    ]);
    reviewing = args[0] ? Number(args[0]) : waiting.items.length ? waiting.items[0].id : null;
    fill("review-list", waiting.items.length ? waiting.items.map((c) => el("li", {},
      el("a", { href: `#/review/${c.id}`, "aria-current": c.id === reviewing ? "true" : null },
        c.title || `Conversation #${c.id}`),
      el("span", { class: "muted" }, ` · ${c.message_count} messages · ${when(c.last_message_at || c.started_at)}`)))
      : [el("li", { class: "muted" }, "Nothing is waiting for review.")]);
    const a = active.conversation;
    fill("active-box", a ? [
      el("p", {}, `${a.title || "Conversation #" + a.id} · ${a.message_count} messages${a.is_paused ? " · paused" : ""}`),
      el("button", { type: "button", id: "close-active", onclick: () => closeActive(a.id) }, "Close and review"),
    ] : [el("p", { class: "muted" }, "No active conversation.")]);
    if (reviewing === null) {
      $("preview").hidden = true;
      return;
    }
    const shown = preview !== null && preview.conversation_id === reviewing && !$("preview").hidden;
    renderPreview(await get(`/conversations/${reviewing}/preview`), shown);
    await renderConversation(reviewing);
    return `Review: ${preview.title || "conversation #" + reviewing}`;
  }

  async function closeActive(id) {
    try {
      await post(`/conversations/${id}/close`);
      sayNext("Closed. Review the memory below.", "ok");
      location.hash = `#/review/${id}`;
    } catch (error) { failed(error); }
  }

  async function act(step, action) {
    const before = location.hash;
    try {
      const said = await action();
      const text = typeof said === "string" ? said : step;
      if (location.hash === before) say(text, "ok");
      else sayNext(text, "ok");
    } catch (error) { failed(error); }
  }

  function wireConfirmEditRedirect() {
    $("act-confirm").addEventListener("click", () => act("Remembered. The conversation is archived.", async () => {
      const now = await get(`/conversations/${reviewing}/preview`);
      if (whatConfirmStores(now) !== whatConfirmStores(preview)) { // another tab or client changed it meanwhile
        renderPreview(now);
        throw new Error("the memory was changed elsewhere (another tab or client) since this page showed it; "
          + "it now reads as shown: review it and confirm again.");
      }
      const result = await post(`/conversations/${reviewing}/confirm`);
      const made = (result.memories || [])[0] || {};
      const storylineId = made.storyline_id ?? previewFields(preview).destination;
      $("preview").hidden = true;
      location.hash = storylineId ? `#/story/${storylineId}${made.id ? "?memory=" + made.id : ""}` : "#/review";
    }));
    $("act-edit").addEventListener("click", () => {
      $("edit-form").hidden = false;
      $("edit-text").value = previewFields(preview).narrative;
      fill("edit-entities", kept(preview).map((e) => {
        const id = `remove-${e.key}`;
        return el("li", {}, el("input", { type: "checkbox", id, value: e.key }), " ",
          el("label", { for: id }, `Remove ${entityText(e)}`));
      }));
      $("edit-text").focus();
    });
    $("edit-cancel").addEventListener("click", () => { $("edit-form").hidden = true; $("act-edit").focus(); });
    $("edit-form").addEventListener("submit", (event) => {
      event.preventDefault();
      act("Edit saved.", async () => {
        const remove = [...$("edit-entities").querySelectorAll("input:checked")].map((box) => box.value);
        const body = { narrative: $("edit-text").value };
        if (remove.length) body.remove_entities = remove;
        renderPreview(await patch(`/conversations/${reviewing}/preview`, body));
        $("preview-title").focus();
      });
    });
    $("act-redirect").addEventListener("click", () => {
      M.storylineOptions($("redirect-select"), previewFields(preview).destination);
      $("redirect-form").hidden = false;
      $("redirect-select").focus();
    });
    $("redirect-cancel").addEventListener("click", () => { $("redirect-form").hidden = true; $("act-redirect").focus(); });
    $("redirect-form").addEventListener("submit", (event) => {
      event.preventDefault();
      const id = Number($("redirect-select").value);
      act(`Redirected to ${M.storylineName(id)}.`, async () => {
        renderPreview(await patch(`/conversations/${reviewing}/preview`, { storyline_id: id }));
        $("preview-title").focus();
      });
    });
    $("act-resume").addEventListener("click", () => act("Resumed: the conversation is active again.", async () => {
      await post(`/conversations/${reviewing}/resume`);
      $("preview").hidden = true;
      location.hash = "#/review";
    }));
  }

  /* ----- split: each part has its text, its storyline and the extracted items it carries ----- */

  let partCount = 0;
  function addPart(text) {
    partCount += 1;
    const n = partCount;
    const select = el("select", { id: `split-storyline-${n}` });
    M.storylineOptions(select, previewFields(preview).destination);
    const items = kept(preview).map((e) => {
      const id = `split-${n}-${e.key}`;
      const box = el("input", { type: "checkbox", id, value: e.key, "data-key": e.key });
      box.addEventListener("change", () => { // an item goes with one part only
        if (!box.checked) return;
        for (const other of $("split-parts").querySelectorAll(`input[data-key="${e.key}"]`)) {
          if (other !== box) other.checked = false;
        }
      });
      return el("li", {}, box, " ", el("label", { for: id }, entityText(e)));
    });
    const item = el("li", { class: "part" },
      el("label", { for: `split-text-${n}`, class: "part-label" }, "Part"),
      el("textarea", { id: `split-text-${n}`, rows: 3 }),
      el("label", { for: select.id }, "Storyline"), select,
      items.length ? el("fieldset", { class: "carries" }, el("legend", {}, "Extracted items this part carries"),
        el("ul", { class: "plain checks" }, items)) : null,
      el("button", { type: "button", onclick: () => { item.remove(); numberParts(); $("split-add").focus(); } },
        "Remove part"));
    item.querySelector("textarea").value = text;
    $("split-parts").append(item);
    numberParts();
    return item;
  }

  function numberParts() {
    [...$("split-parts").children].forEach((li, i) => { li.querySelector(".part-label").textContent = `Part ${i + 1}`; });
  }

  /* The parts as the API takes them, or null after saying what to fix (and focusing it). */
  function splitParts() {
    const items = [...$("split-parts").children];
    for (const li of items) li.querySelector("textarea").removeAttribute("aria-invalid");
    if (items.length < 2) {
      say("A split needs at least two parts; add a part or use Confirm.", "error");
      $("split-add").focus();
      return null;
    }
    const empty = items.findIndex((li) => !li.querySelector("textarea").value.trim());
    if (empty >= 0) {
      const box = items[empty].querySelector("textarea");
      box.setAttribute("aria-invalid", "true");
      say(`Part ${empty + 1} is empty: write what it should remember, or remove it.`, "error");
      box.focus();
      return null;
    }
    return items.map((li) => ({
      narrative: li.querySelector("textarea").value.trim(),
      storyline_id: Number(li.querySelector("select").value),
      entity_ids: [...li.querySelectorAll(".carries input:checked")].map((box) => box.value),
    }));
  }

  function wireSplit() {
    $("act-split").addEventListener("click", () => {
      $("split-form").hidden = false;
      $("split-parts").replaceChildren();
      addPart(previewFields(preview).narrative);
      addPart("");
      $("split-parts").querySelector("textarea").focus();
    });
    $("split-add").addEventListener("click", () => addPart("").querySelector("textarea").focus());
    $("split-cancel").addEventListener("click", () => { $("split-form").hidden = true; $("act-split").focus(); });
    $("split-form").addEventListener("submit", (event) => {
      event.preventDefault();
      const parts = splitParts();
      if (!parts) return;
      act("", async () => {
        const result = await post(`/conversations/${reviewing}/split`, { parts });
        const made = result.memories || [];
        $("preview").hidden = true;
        const where = made.map((m) => `“${clip(m.content)}” → ${M.storylineName(m.storyline_id)}`).join("; ");
        const first = made[0];
        location.hash = first ? `#/story/${first.storyline_id}?memory=${first.id}` : "#/story";
        return `Split into ${made.length} memories: ${where}. The conversation is archived.`;
      });
    });
  }

  function clip(text) {
    const words = String(text).split(/\s+/);
    return words.length > 8 ? words.slice(0, 8).join(" ") + "…" : String(text);
  }

  route("review", reviewView);
  wireConfirmEditRedirect();
  wireSplit();
})();
