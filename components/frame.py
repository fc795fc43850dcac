"""Make sure a page runs inside app.py's frame (navigation, wide layout, sidebar).

Streamlit keeps a legacy mode for apps with a `pages/` folder next to the entrypoint: until
some session has run `st.navigation`, a first request for `/clusters` runs
`pages/clusters.py` on its own, without the app's layout and navigation. A deep link opened
right after the server started would hit exactly that (and so does every `AppTest` run,
which starts each run in that mode). Every page calls `ensure_app_frame` first, through
`components.data.open_page`. app.py marks each run it frames (`enter_frame`, from
`components.data.open_workspace`); a page that finds no mark ran on its own, and is sent
through app.py with public calls only: `st.navigation`, which Streamlit documents as the
switch ("As soon as any session of your app executes the st.navigation command, your app
will ignore the pages/ directory (across all sessions)"), then `st.rerun`, which runs the
same URL path and query again, now through app.py (a page's identity is its URL path, the
same in both modes). Checked by tests/test_app.py (every page test starts in that mode)
and tests/test_browser.py (a fresh server).
"""

from __future__ import annotations

import streamlit as st

from components import nav
from conceptlens.workspace import read_only

# Set in the session by app.py's run before the page runs, taken by the page: a page that
# does not find it was not run by app.py in this run.
FRAMED = "conceptlens_framed"


def app_pages() -> list:
    """The dashboard's pages as app.py's `st.navigation` takes them (components/nav.py)."""
    return [
        st.Page(p.path, title=p.title, icon=p.icon, url_path=p.name, default=p.default) for p in nav.PAGES
    ]


def enter_frame() -> None:
    """app.py's run frames the page it is about to run (called on every rerun)."""
    st.session_state[FRAMED] = True


def ensure_app_frame() -> None:
    """Run this page through app.py when Streamlit's legacy mode ran it on its own. A
    participant's run is framed too: app.py puts `?study=` in the address before it runs the
    participant's page (which is not in pages/, so the legacy mode never runs it alone)."""
    if st.session_state.pop(FRAMED, False) or st.query_params.get(nav.STUDY_PARAM):
        return
    st.navigation(app_pages(), position="hidden")
    st.rerun()


# The browser's own address (read when the button is pressed, so it holds every choice made
# since the page was drawn). navigator.clipboard needs a secure context (HTTPS, localhost);
# elsewhere the textarea fallback copies, and if both fail the link is shown to copy by hand.
_COPY_LINK = """
<style>
  body { margin: 0; font-family: "Source Sans Pro", "Source Sans 3", sans-serif; }
  button { display: inline-flex; align-items: center; gap: 6px; padding: 4px 12px;
           font: inherit; font-size: 14px; color: rgb(49, 51, 63); background: white;
           border: 1px solid rgba(49, 51, 63, 0.2); border-radius: 8px; cursor: pointer; }
  button:hover { border-color: #2f6fde; color: #2f6fde; }
  #status { font-size: 12px; color: rgb(100, 102, 110); margin-left: 6px; word-break: break-all; }
</style>
<button id="copy" type="button" title="Copy a link to this view (every choice on the page is in it)">
  <svg width="14" height="14" viewBox="0 0 24 24" aria-hidden="true"><path fill="currentColor" d="
    M3.9 12a3.1 3.1 0 0 1 3.1-3.1h4V7H7a5 5 0 0 0 0 10h4v-1.9H7A3.1 3.1 0 0 1 3.9 12zM8 13h8v-2H8v2z
    m9-6h-4v1.9h4a3.1 3.1 0 0 1 0 6.2h-4V17h4a5 5 0 0 0 0-10z"/></svg>
  Copy link
</button><span id="status" role="status"></span>
<script>
  const button = document.getElementById("copy");
  const status = document.getElementById("status");
  button.addEventListener("click", async () => {
    const url = window.parent.location.href;
    let copied = false;
    try { await navigator.clipboard.writeText(url); copied = true; } catch (e) {}
    if (!copied) {
      const area = document.createElement("textarea");
      area.value = url;
      document.body.appendChild(area);
      area.select();
      try { copied = document.execCommand("copy"); } catch (e) {}
      area.remove();
    }
    button.dataset.link = url;
    status.textContent = copied ? "Copied" : url;
  });
</script>
"""


def copy_link() -> None:
    """A "Copy link" button: the address of the view on screen, to share or bookmark."""
    st.iframe(_COPY_LINK, height=40)


def sidebar_tools() -> None:
    """What the app's frame shows on every page, below the navigation."""
    copy_link()
    if read_only():
        st.caption("Read-only deployment: nothing here changes the workspace.")
