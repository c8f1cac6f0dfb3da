/* narrative review page: what several views share — the storylines, a memory as a list item (with edit
 * and delete), a storyline summary with its bullets, a conversation's transcript. */
"use strict";

const M = (() => {
  const { el, $, get, patch, del, say, failed, when, stars } = N;
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

  /* "- a\n- b\nplain" → <ul><li>a</li><li>b</li></ul><p>plain</p>: the summary keeps its bullets. */
  function summaryNodes(text) {
    const nodes = [];
    let list = null;
    for (const line of String(text || "").split("\n")) {
      const bullet = line.match(/^\s*[-*•]\s+(.*)$/);
      if (bullet) {
        if (!list) nodes.push(list = el("ul", { class: "summary" }));
        list.append(el("li", {}, bullet[1]));
      } else if (line.trim()) {
        list = null;
        nodes.push(el("p", {}, line));
      }
    }
    return nodes;
  }

  function transcriptItem(m) {
    return el("li", { class: `turn ${m.role}` },
      el("p", { class: "meta" }, `${m.speaker || m.role} · #${m.position} · ${when(m.created_at)}`),
      el("p", {}, m.content));
  }

  /* A memory as a list item; with {editable: true} it gets Edit and Delete, both done in place. */
  function memoryItem(m, options, ...extra) {
    const id = m.id ?? m.memory_id;
    const links = [];
    if (m.conversation_id) links.push(el("a", { href: `#/archive/${m.conversation_id}` }, "transcript"));
    if (m.narrative_id) links.push(el("a", { href: `#/chain/${m.narrative_id}` }, "narrative link"));
    links.push(el("a", { href: `#/influence/memory/${id}` }, "influence"));
    links.push(el("a", { href: `#/history/${id}`, "aria-label": `history of memory #${id}` }, "history"));
    // a search hit shows what answers (hit.text: the turns and passages no better hit shows); the editor
    // always starts from the memory's own text
    // a list shows each turn once (`text`: the turns no memory above it showed)
    const content = el("p", { class: "content" }, m.shown_text || m.text || m.content);
    content.dataset.full = m.content;
    const edited = el("span", { class: "edited" }, m.user_edited ? " · edited by you" : "");
    const item = el("li", { class: "memory" }, content,
      el("p", { class: "meta" },
        el("span", { class: "badge" }, m.stream), " ", stars(m.importance), " ",
        el("time", { datetime: m.event_at || m.created_at }, when(m.event_at || m.created_at)), " · #",
        String(id), edited, " · ", links.flatMap((link, i) => (i ? [" · ", link] : [link]))),
      ...extra);
    if (options && options.editable) item.append(memoryActions(item, id, content, edited));
    return item;
  }

  function memoryActions(item, id, content, edited) {
    const bar = el("div", { class: "row memory-actions", role: "group", "aria-label": `Memory #${id}` });
    const editButton = el("button", { type: "button", "aria-label": `Edit memory #${id}` }, "Edit");
    const deleteButton = el("button", { type: "button", "aria-label": `Delete memory #${id}` }, "Delete");
    bar.append(editButton, deleteButton);
    editButton.addEventListener("click", () => openEditor(item, id, content, edited, bar));
    deleteButton.addEventListener("click", () => askDelete(item, id, bar));
    return bar;
  }

  function openEditor(item, id, content, edited, bar) {
    const textId = `memory-edit-${id}`;
    const form = el("form", { class: "memory-edit" },
      el("label", { for: textId }, `Text of memory #${id}`), el("textarea", { id: textId, rows: 4 }),
      el("div", { class: "row" }, el("button", { type: "submit" }, "Save"),
        el("button", { type: "button", class: "cancel" }, "Cancel")));
    form.querySelector("textarea").value = content.dataset.full ?? content.textContent;
    bar.hidden = true;
    item.append(form);
    form.querySelector("textarea").focus();
    const close = () => { form.remove(); bar.hidden = false; bar.querySelector("button").focus(); };
    form.querySelector(".cancel").addEventListener("click", close);
    form.addEventListener("submit", async (event) => {
      event.preventDefault();
      const text = form.querySelector("textarea").value.trim();
      if (!text) { say("The memory needs some text; use Delete to remove it.", "error"); return; }
      try {
        const saved = await patch(`/memories/${id}`, { content: text });
        content.textContent = saved.content;
        content.dataset.full = saved.content;
        edited.textContent = saved.user_edited ? " · edited by you" : "";
        close();
        say(`Memory #${id} saved.`, "ok");
      } catch (error) { failed(error); }
    });
  }

  function askDelete(item, id, bar) {
    const ask = el("div", { class: "row confirm-delete", role: "group", "aria-label": "Confirm delete" },
      el("span", {}, "Delete this memory for good?"),
      el("button", { type: "button", class: "danger" }, "Yes, delete"),
      el("button", { type: "button" }, "Keep it"));
    bar.hidden = true;
    item.append(ask);
    const [yes, keep] = ask.querySelectorAll("button");
    keep.addEventListener("click", () => { ask.remove(); bar.hidden = false; bar.querySelector("button").focus(); });
    yes.addEventListener("click", async () => {
      try {
        await del(`/memories/${id}`);
        const list = item.parentElement;
        item.remove();
        say(`Memory #${id} deleted.`, "ok");
        if (list && list.closest("main")) (list.closest("section") || $("main")).querySelector("h1").focus();
      } catch (error) { failed(error); }
    });
    yes.focus();
  }

  return { loadStorylines, storylineName, storylineOptions, summaryNodes, transcriptItem, memoryItem,
    get storylines() { return storylines; } };
})();
