/* narrative review page: the views (review, storylines, archive, chain, search, influence). */
"use strict";

(() => {
  const { el, $, fill, get, post, patch, say, sayNext, failed, when, stars, route } = N;
  let storylines = [];

  async function loadStorylines() {
    const page = await get("/storylines?limit=200");
    storylines = page.items.slice().sort((a, b) => (b.kind === "your_story") - (a.kind === "your_story"));
    return storylines;
  }

  function storylineName(id) {
    const found = storylines.find((s) => s.id === id);
    return found ? found.name : id === null || id === undefined ? "Your Story" : `storyline #${id}`;
  }

  function storylineOptions(select, selected) {
    select.replaceChildren(...storylines.filter((s) => s.status !== "archived").map((s) =>
      el("option", { value: s.id, selected: s.id === selected }, s.name)));
  }

  function memoryItem(m, ...extra) {
    const links = [];
    if (m.conversation_id) links.push(el("a", { href: `#/archive/${m.conversation_id}` }, "transcript"));
    if (m.narrative_id) links.push(el("a", { href: `#/chain/${m.narrative_id}` }, "narrative link"));
    links.push(el("a", { href: `#/influence/memory/${m.id ?? m.memory_id}` }, "influence"));
    return el("li", { class: "memory" },
      el("p", { class: "content" }, m.content),
      el("p", { class: "meta" },
        el("span", { class: "badge" }, m.stream), " ", stars(m.importance), " ",
        el("time", { datetime: m.event_at || m.created_at }, when(m.event_at || m.created_at)), " · #",
        String(m.id ?? m.memory_id), m.user_edited ? " · edited by you" : "", " · ",
        links.flatMap((link, i) => (i ? [" · ", link] : [link]))),
      ...extra);
  }

  /* ================= review (Talking Rock) ================= */

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

  function renderPreview(p) {
    preview = p;
    const f = previewFields(p);
    $("preview").hidden = false;
    fill("preview-title", p.title ? `Memory from “${p.title}”` : `Memory from conversation #${p.conversation_id}`);
    fill("preview-narrative", f.narrative);
    if (p.user_edited) $("preview-narrative").append(el("span", { class: "muted" }, " (edited by you)"));
    const kept = f.entities.filter((e) => !f.removed.has(e.key));
    fill("preview-entities", kept.length ? kept.map((e) => el("li", {}, entityText(e)))
      : [el("li", { class: "muted" }, "nothing extracted")]);
    fill("preview-deltas", f.deltas.length ? f.deltas.map((d) => el("li", {}, deltaText(d)))
      : [el("li", { class: "muted" }, "no new or resolved threads")]);
    const suggested = f.suggestion.storyline_id === f.destination;
    fill("preview-destination", el("strong", {}, f.destinationName || storylineName(f.destination)),
      suggested ? " (suggested)" : "", f.reason ? el("span", { class: "muted" }, ` — ${f.reason}`) : null,
      !suggested && f.suggestion.name ? el("span", { class: "muted" }, ` · suggested: ${f.suggestion.name}`) : null);
    for (const form of ["edit-form", "redirect-form", "split-form"]) $(form).hidden = true;
  }

  async function reviewView(args) {
    await loadStorylines();
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
    renderPreview(await get(`/conversations/${reviewing}/preview`));
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
      await action();
      if (location.hash === before) say(step, "ok");
      else sayNext(step, "ok");
    } catch (error) { failed(error); }
  }

  function wireReview() {
    $("act-confirm").addEventListener("click", () => act("Remembered. The conversation is archived.", async () => {
      const result = await post(`/conversations/${reviewing}/confirm`);
      const made = (result.memories || [])[0] || {};
      const memoryId = made.id;
      const storylineId = made.storyline_id ?? previewFields(preview).destination;
      $("preview").hidden = true;
      location.hash = storylineId ? `#/story/${storylineId}${memoryId ? "?memory=" + memoryId : ""}` : "#/review";
    }));
    $("act-edit").addEventListener("click", () => {
      const f = previewFields(preview);
      $("edit-form").hidden = false;
      $("edit-text").value = f.narrative;
      fill("edit-entities", f.entities.filter((e) => !f.removed.has(e.key)).map((e) => {
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
      storylineOptions($("redirect-select"), previewFields(preview).destination);
      $("redirect-form").hidden = false;
      $("redirect-select").focus();
    });
    $("redirect-cancel").addEventListener("click", () => { $("redirect-form").hidden = true; $("act-redirect").focus(); });
    $("redirect-form").addEventListener("submit", (event) => {
      event.preventDefault();
      const id = Number($("redirect-select").value);
      act(`Redirected to ${storylineName(id)}.`, async () => {
        renderPreview(await patch(`/conversations/${reviewing}/preview`, { storyline_id: id }));
        $("preview-title").focus();
      });
    });
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
      const parts = [...$("split-parts").children].map((li) => ({
        narrative: li.querySelector("textarea").value,
        storyline_id: Number(li.querySelector("select").value),
      })).filter((p) => p.narrative.trim());
      act(`Split into ${parts.length} memories; the conversation is archived.`, async () => {
        await post(`/conversations/${reviewing}/split`, { parts });
        $("preview").hidden = true;
        location.hash = "#/story";
      });
    });
    $("act-resume").addEventListener("click", () => act("Resumed: the conversation is active again.", async () => {
      await post(`/conversations/${reviewing}/resume`);
      $("preview").hidden = true;
      location.hash = "#/review";
    }));
  }

  let partCount = 0;
  function addPart(text) {
    partCount += 1;
    const textId = `split-text-${partCount}`;
    const selectId = `split-storyline-${partCount}`;
    const select = el("select", { id: selectId });
    storylineOptions(select, previewFields(preview).destination);
    const item = el("li", { class: "part" },
      el("label", { for: textId }, `Part ${$("split-parts").children.length + 1}`),
      el("textarea", { id: textId, rows: 3 }),
      el("label", { for: selectId }, "Storyline"), select,
      el("button", { type: "button", onclick: () => { item.remove(); $("split-add").focus(); } }, "Remove part"));
    item.querySelector("textarea").value = text;
    $("split-parts").append(item);
    return item;
  }

  /* ================= storylines ================= */

  const story = { id: null, offset: 0, items: [] };

  async function storyView(args, query) {
    await loadStorylines();
    const current = args[0] ? Number(args[0]) : (storylines[0] || {}).id;
    fill("storyline-list", storylines.map((s) => el("li", {},
      el("a", { href: `#/story/${s.id}`, "aria-current": s.id === current ? "page" : null }, s.name),
      el("span", { class: "muted" }, s.kind === "your_story" ? " · permanent" : s.status === "archived" ? " · archived" : ""))));
    if (current === undefined) return;
    const s = await get(`/storylines/${current}`);
    $("storyline").hidden = false;
    fill("storyline-name", s.name);
    fill("storyline-about", [s.description, s.keywords && s.keywords.length ? "keywords: " + s.keywords.join(", ") : ""]
      .filter(Boolean).join(" · "));
    fill("storyline-summary", s.summary || "");
    Object.assign(story, { id: current, offset: 0, items: [] });
    await loadStoryPage();
    const wanted = query.get("memory");
    const target = wanted && document.getElementById(`story-memory-${wanted}`);
    if (target) target.classList.add("highlight");
  }

  async function loadStoryPage() {
    const page = await get(`/memories?storyline_id=${story.id}&limit=100&offset=${story.offset}`);
    story.items = page.items.slice().reverse().concat(story.items); // oldest first
    story.offset = page.next_offset ?? story.offset + page.items.length;
    $("storyline-earlier").hidden = page.next_offset === null;
    fill("storyline-memories", story.items.length ? story.items.map((m) => {
      const item = memoryItem(m);
      item.id = `story-memory-${m.id}`;
      return item;
    }) : [el("li", { class: "muted" }, "No memories here yet.")]);
  }

  /* ================= archive ================= */

  async function archiveView(args) {
    const data = await get(`/conversations/${Number(args[0])}/archive`);
    const c = data.conversation || {};
    fill("archive-title", c.title || `Conversation #${c.id}`);
    fill("archive-about", `${c.status} · started ${when(c.started_at)}` +
      (c.archived_at ? ` · archived ${when(c.archived_at)}` : "") + ` · ${c.message_count} messages`);
    const memories = data.memories || [];
    fill("archive-memories", memories.length ? memories.map((m) => memoryItem(m))
      : [el("li", { class: "muted" }, "No memories were made from it.")]);
    const derived = data.derived || [];
    $("archive-derived-box").hidden = !derived.length;
    fill("archive-derived-title", `${derived.length} facts, decisions and notes taken along the way`);
    fill("archive-derived", derived.map((m) => memoryItem(m)));
    fill("archive-messages", (data.messages || []).map((m) => el("li", { class: `turn ${m.role}` },
      el("p", { class: "meta" }, `${m.speaker || m.role} · #${m.position} · ${when(m.created_at)}`),
      el("p", {}, m.content))));
  }

  /* ================= the narrative chain ================= */

  function linkItem(n) {
    return el("li", {}, el("a", { href: `#/chain/${n.id}` }, n.summary),
      el("span", { class: "muted" }, ` · ${n.topic || "no topic"} · ${when(n.created_at)}`));
  }

  let chainLink = null;
  async function chainView(args) {
    let link = null;
    if (args[0]) link = await get(`/narratives/${Number(args[0])}`);
    else link = (await get("/narratives/latest")).narrative;
    chainLink = link;
    if (!link) {
      $("chain-link").hidden = true;
      fill("chain-earlier");
      fill("chain-later");
      say("No narrative links yet.");
      return;
    }
    const [back, forward] = await Promise.all([
      get(`/narratives/${link.id}/back?depth=8`), get(`/narratives/${link.id}/forward?depth=8`),
    ]);
    $("chain-link").hidden = false;
    fill("chain-summary", link.summary);
    fill("chain-about", `link #${link.id} · ${link.topic || "no topic"} · ${link.sealed ? "sealed" : "running"} · ` +
      `${when(link.created_at)}${link.storyline_id ? " · " + storylineName(link.storyline_id) : ""}`);
    const memories = await Promise.all(link.memory_ids.slice(0, 20).map((id) => get(`/memories/${id}`)
      .catch(() => ({ id, content: `memory #${id} (deleted)` }))));
    fill("chain-memories", memories.length ? memories.map((m) => el("li", {}, m.content, " ",
      el("a", { href: `#/influence/memory/${m.id}`, "aria-label": `influence of memory ${m.id}` }, `#${m.id}`)))
      : [el("li", { class: "muted" }, "no memories")]);
    const earlier = back.items.slice(1);
    const later = forward.items.filter((n) => n.id !== link.id);
    fill("chain-earlier", earlier.length ? earlier.map(linkItem) : [el("li", { class: "muted" }, "start of the thread")]);
    fill("chain-later", later.length ? later.map(linkItem) : [el("li", { class: "muted" }, "nothing later yet")]);
    $("chain-back").disabled = !earlier.length;
    $("chain-forward").disabled = !later.length;
    chainLink.next = later.length ? later[0].id : null;
  }

  function wireChain() {
    $("chain-back").addEventListener("click", () => {
      if (chainLink && chainLink.previous_narrative_id) location.hash = `#/chain/${chainLink.previous_narrative_id}`;
    });
    $("chain-forward").addEventListener("click", () => {
      if (chainLink && chainLink.next) location.hash = `#/chain/${chainLink.next}`;
    });
    $("chain-latest").addEventListener("click", () => { location.hash = "#/chain"; });
    $("chain-form").addEventListener("submit", async (event) => {
      event.preventDefault();
      const q = $("chain-query").value.trim();
      if (!q) return;
      try {
        const found = await get(`/narratives/search?q=${encodeURIComponent(q)}`);
        fill("chain-found-title", `Links mentioning “${q}”`);
        $("chain-found-box").hidden = false;
        fill("chain-found", found.items.length ? found.items.map(linkItem)
          : [el("li", { class: "muted" }, "No link mentions that.")]);
      } catch (error) { failed(error); }
    });
  }

  /* ================= search with why ================= */

  function whyList(why) {
    const rows = [
      ["keyword rank", why.bm25_rank ?? "—"],
      ["vector rank", why.vector_rank === null || why.vector_rank === undefined ? "—"
        : `${why.vector_rank} (cosine ${why.similarity})`],
      ["fused (RRF)", why.fused], ["recency", why.recency],
      ["weights", `semantic ${why.semantic_weight} · recency ${why.recency_weight}`], ["score", why.score],
    ];
    return el("details", { class: "why" }, el("summary", {}, `Why: ${why.summary}`),
      el("dl", {}, rows.flatMap(([term, value]) => [el("dt", {}, term), el("dd", {}, String(value))])));
  }

  async function searchView(_args, query) {
    const q = query.get("q");
    const mode = query.get("mode") || "hybrid";
    $("search-mode").value = mode;
    if (!q) {
      fill("search-results");
      fill("search-count", "");
      return;
    }
    $("search-query").value = q;
    const found = await get(`/search?q=${encodeURIComponent(q)}&mode=${encodeURIComponent(mode)}&k=20`);
    fill("search-count", `${found.items.length} memories for “${q}”`);
    fill("search-results", found.items.map((hit) => memoryItem({ ...hit, id: hit.memory_id }, whyList(hit.why))));
  }

  function wireSearch() {
    $("search-form").addEventListener("submit", (event) => {
      event.preventDefault();
      const q = $("search-query").value.trim();
      if (q) location.hash = `#/search?q=${encodeURIComponent(q)}&mode=${encodeURIComponent($("search-mode").value)}`;
    });
  }

  /* ================= influence: explain a use ================= */

  let usesShown = 20;
  async function influenceView(args) {
    const uses = await get(`/uses?limit=${usesShown}`);
    fill("use-list", uses.items.length ? uses.items.map((u) => el("li", {},
      el("a", { href: `#/influence/${u.id}`, "aria-current": args[0] === String(u.id) ? "page" : null },
        `${u.kind}: ${u.query}`),
      el("span", { class: "muted" }, ` · ${(u.references || []).length} memories · ${when(u.created_at)}`)))
      : [el("li", { class: "muted" }, "Memory has not been used yet.")]);
    $("use-more").hidden = uses.next_offset === null;
    if (args[0] === "memory") return memoryInfluence(Number(args[1]));
    const id = args[0] ? Number(args[0]) : uses.items.length ? uses.items[0].id : null;
    if (id === null) { $("use").hidden = true; return; }
    const data = await get(`/uses/${id}`);
    const use = data.use || data;
    $("use").hidden = false;
    fill("use-title", `${use.kind}: “${use.query}”`);
    fill("use-about", [`use #${use.id} · ${when(use.created_at)}${use.outcome ? " · outcome: " + use.outcome : ""}`,
      data.summary ? el("br") : null, data.summary || null,
      ...(data.outcomes || []).map((o) => [el("br"), `outcome #${o.use_id}: ${o.outcome}`,
        o.correction ? ` — ${o.correction}` : ""])]);
    fill("use-refs-title", "Memories that shaped it");
    const refs = data.memories || data.references || use.references || [];
    fill("use-refs", refs.length ? refs.map(referenceItem) : [el("li", { class: "muted" }, "No memories were used.")]);
  }

  function referenceItem(r) {
    const m = r.memory || { id: r.memory_id, content: r.content ?? `memory #${r.memory_id}`, stream: r.stream,
      importance: r.importance, created_at: r.created_at, conversation_id: r.conversation_id,
      narrative_id: r.narrative_id };
    const kind = (r.influence_type || "").replace(/_/g, " ");
    const reasoning = r.reasoning ?? r.why;
    const sources = (r.messages || []).map((msg) => el("li", {},
      `${msg.speaker || msg.role} (message #${msg.message_id}, position ${msg.position}): ${msg.text}`));
    return memoryItem(m,
      el("p", { class: "influence" }, el("strong", {}, kind), ` · score ${Number(r.score ?? 0).toFixed(3)}`,
        r.rank ? ` · rank ${r.rank}` : "", r.storyline ? ` · ${r.storyline.name}` : "",
        reasoning ? el("span", {}, ` — ${reasoning}`) : null),
      sources.length ? el("details", { class: "why" }, el("summary", {}, `From ${sources.length} message(s)`),
        el("ul", {}, sources)) : null);
  }

  async function memoryInfluence(memoryId) {
    const [memory, data] = await Promise.all([get(`/memories/${memoryId}`), get(`/memories/${memoryId}/influence`)]);
    $("use").hidden = false;
    fill("use-title", `Memory #${memory.id}`);
    fill("use-about", memory.content);
    fill("use-refs-title", "Uses it shaped");
    fill("use-refs", data.uses.length ? data.uses.map((u) => el("li", {},
      el("a", { href: `#/influence/${u.id}` }, `${u.kind}: ${u.query}`),
      el("span", { class: "muted" }, ` · ${when(u.created_at)}`)))
      : [el("li", { class: "muted" }, "This memory has not shaped anything yet.")]);
  }

  $("use-more").addEventListener("click", () => { usesShown += 20; N.dispatch(); });
  $("storyline-earlier").addEventListener("click", () => loadStoryPage().catch(failed));

  route("review", reviewView);
  route("story", storyView);
  route("archive", archiveView);
  route("chain", chainView);
  route("search", searchView);
  route("influence", influenceView);
  wireReview();
  wireChain();
  wireSearch();
  N.start();
})();
