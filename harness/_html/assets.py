"""The page's own style and script: ours, constant, never built from session text."""

from __future__ import annotations

from .markdown import HIGHLIGHT_CSS

__all__ = ["SCRIPT", "STYLE"]

STYLE = (
    """
:root { --fg: #1f2328; --muted: #656d76; --line: #d0d7de; --user: #ddf4ff; --asst: #f6f8fa;
  --tool: #fffbe6; --err: #ffebe9; --path: #1f883d; --sum: #fbefff; --add: #dafbe1;
  --del: #ffebe9; --hunk: #ddf4ff; }
* { box-sizing: border-box; }
body { font: 14px/1.5 system-ui, sans-serif; color: var(--fg); margin: 0; }
header.top { border-bottom: 1px solid var(--line); padding: .6rem 1rem; }
header.top h1 { font-size: 1.4rem; margin: 0 0 .3rem; }
.meta, .totals, .stats { color: var(--muted); margin: .1rem 0; }
.usage table { border-collapse: collapse; font-size: 12px; margin: .3rem 0; }
.usage td, .usage th { border: 1px solid var(--line); padding: .1rem .4rem; text-align: right; }
.usage td:first-child, .usage th:first-child { text-align: left; }
.controls { display: flex; flex-wrap: wrap; gap: .4rem; align-items: center; margin: .4rem 0; }
.controls input[type=search] { min-width: 18rem; padding: .2rem .4rem; }
#results { max-height: 14rem; overflow: auto; margin: .2rem 0; padding-left: 1.5rem;
  font-size: 12px; }
#results:empty { display: none; }
.layout { display: flex; align-items: flex-start; }
nav.side { position: sticky; top: 0; width: 20rem; max-height: 100vh; overflow: auto;
  padding: .6rem; border-right: 1px solid var(--line); font-size: 12px; flex: none; }
nav.side h2 { font-size: 13px; margin: 0 0 .3rem; }
nav.side ul { list-style: none; margin: 0; padding-left: .8rem; }
nav.side > ul { padding-left: 0; }
nav.side a { color: var(--muted); text-decoration: none; display: block; white-space: nowrap;
  overflow: hidden; text-overflow: ellipsis; }
nav.side a.on-path { color: var(--fg); border-left: 2px solid var(--path); padding-left: .3rem; }
nav.side a.leaf { font-weight: 700; }
nav.side li.alt > a { font-style: italic; }
nav.side li.alt.active > a { color: var(--path); }
main#tree { flex: 1; min-width: 0; max-width: 64rem; padding: .6rem 1rem; }
.entry { border-left: 3px solid transparent; margin: .4rem 0; padding: .3rem .6rem;
  border-radius: 4px; content-visibility: auto; contain-intrinsic-size: auto 4rem; }
.entry.on-path { border-left-color: var(--path); }
.entry.leaf { outline: 2px solid var(--path); }
.entry.target { box-shadow: 0 0 0 3px #fb8500; }
.entry.match { box-shadow: 0 0 0 2px #bf8700; }
.entry .head { font-size: 12px; color: var(--muted); }
.entry .head a.eid { color: var(--muted); }
.entry .head code { font-size: 11px; }
.role-user { background: var(--user); }
.role-assistant { background: var(--asst); }
.role-toolResult, .role-bashExecution { background: var(--tool); }
.error { background: var(--err); }
.compaction, .branch_summary, .role-compactionSummary, .role-branchSummary {
  background: var(--sum); }
.minor { padding: 0 .6rem; margin: 0; font-size: 12px; color: var(--muted); }
.label { background: var(--path); color: white; border-radius: 8px; padding: 0 .4rem;
  font-size: 11px; margin-left: .3rem; }
.text { white-space: pre-wrap; overflow-wrap: anywhere; }
.md { overflow-wrap: anywhere; }
.md p { margin: .3rem 0; }
.md h1, .md h2, .md h3, .md h4, .md h5, .md h6 { font-size: 1.05rem; margin: .5rem 0 .2rem; }
.md table { border-collapse: collapse; }
.md td, .md th { border: 1px solid var(--line); padding: .1rem .4rem; }
pre { white-space: pre-wrap; overflow-wrap: anywhere; background: white; padding: .4rem;
  border: 1px solid var(--line); border-radius: 4px; margin: .3rem 0; }
pre.diff .add { background: var(--add); display: block; }
pre.diff .del { background: var(--del); display: block; }
pre.diff .hunk { background: var(--hunk); display: block; color: var(--muted); }
details > summary { cursor: pointer; color: var(--muted); }
details.more > summary { font-size: 12px; }
details.branch { border: 1px dashed var(--line); border-radius: 6px; padding: .2rem .6rem;
  margin: .5rem 0; }
details.branch.active-branch { border-color: var(--path); }
details.branch > summary { font-weight: 600; }
img { max-width: 100%; }
@media (max-width: 50rem) { .layout { display: block; } nav.side { position: static;
  width: auto; max-height: 12rem; border-right: 0; } }
"""
    + HIGHLIGHT_CSS
)

SCRIPT = """
(function () {
  'use strict';
  var entries = null;
  var texts = null;
  function list() {
    if (entries === null) {
      entries = Array.prototype.slice.call(document.querySelectorAll('#tree .entry'));
      texts = new Array(entries.length);
    }
    return entries;
  }
  function textOf(i) {
    if (texts[i] === undefined) { texts[i] = entries[i].textContent.toLowerCase(); }
    return texts[i];
  }
  function setAll(open) {
    document.querySelectorAll('details').forEach(function (d) { d.open = open; });
  }
  function reveal(el) {
    for (var p = el.parentElement; p; p = p.parentElement) {
      if (p.tagName === 'DETAILS') { p.open = true; }
    }
  }
  var current = null;
  function go(id) {
    var el = document.getElementById(id);
    if (!el) { return; }
    reveal(el);
    if (current) { current.classList.remove('target'); }
    current = el;
    el.classList.add('target');
    el.scrollIntoView({block: 'center'});
  }
  function fromHash() {
    var id = '';
    try { id = decodeURIComponent(location.hash.slice(1)); } catch (e) { return; }
    if (id === 'expand-all') { setAll(true); } else if (id) { go(id); }
  }
  function byId(name) { return document.getElementById(name); }
  byId('expand-all').addEventListener('click', function () { setAll(true); });
  byId('collapse-all').addEventListener('click', function () { setAll(false); });
  byId('to-leaf').addEventListener('click', function () {
    var leaf = document.querySelector('.entry.leaf');
    if (leaf) { go(leaf.id); }
  });
  window.addEventListener('hashchange', fromHash);
  var box = byId('search');
  var results = byId('results');
  var count = byId('search-count');
  var timer = null;
  var marked = [];
  function search() {
    var q = box.value.trim().toLowerCase();
    marked.forEach(function (el) { el.classList.remove('match'); });
    marked = [];
    results.textContent = '';
    if (!q) { count.textContent = ''; return; }
    var all = list();
    for (var i = 0; i < all.length; i++) {
      if (textOf(i).indexOf(q) === -1) { continue; }
      var el = all[i];
      el.classList.add('match');
      marked.push(el);
      if (marked.length > 200) { continue; }
      var li = document.createElement('li');
      var a = document.createElement('a');
      a.href = '#' + encodeURIComponent(el.id);
      var head = el.querySelector('.head');
      var t = textOf(i);
      var at = t.indexOf(q);
      a.textContent = (head ? head.textContent.slice(0, 60) : el.id) + ' \\u2026 ' +
        t.slice(Math.max(0, at - 30), at + q.length + 50).replace(/\\s+/g, ' ');
      li.appendChild(a);
      results.appendChild(li);
    }
    count.textContent = marked.length + (marked.length === 1 ? ' entry' : ' entries');
  }
  box.addEventListener('input', function () {
    clearTimeout(timer);
    timer = setTimeout(search, 150);
  });
  box.addEventListener('keydown', function (e) {
    if (e.key === 'Enter' && marked.length) { go(marked[0].id); }
  });
  window.harnessPage = {
    changed: function () { entries = null; },
    go: go
  };
  fromHash();
})();
"""
