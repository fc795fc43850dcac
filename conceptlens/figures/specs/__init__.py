"""The figures of each page, one module per page (named as the page): its `Figure` entries,
whose parameters are the page's URL keys and whose `build(db, params)` the page itself
calls to draw them. Modules are found by `pkgutil` when the catalogue is first used
(conceptlens/figures/catalog.py); `common` holds the parameters pages share and adds none."""
