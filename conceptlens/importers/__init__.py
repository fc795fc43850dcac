"""Bring your own data: `conceptlens init`, `conceptlens import images|features|captions`.

One module per source of images (imagefolder, manifest, imagenet, hf) turns its input into
`images.Item`s; `images.import_images` checks them, makes the thumbnails and writes the
table. `features` and `captions` import what was computed elsewhere. docs/import.md has
the layouts and options.
"""
