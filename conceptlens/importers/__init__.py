"""Bring your own data: `conceptlens init`, `conceptlens import images|features|captions|concepts`.

One module per source of images (imagefolder, manifest, imagenet, hf) turns its input into
`images.Item`s; `images.import_images` checks them, makes the thumbnails and writes the
table. `features` and `captions` import what was computed elsewhere, `concepts` the
ground-truth concepts of the images. docs/import.md has the layouts and options.

What both the command line (which must import light) and an importer read is declared here.
"""

# How `import concepts --from-hierarchy` reads the label hierarchy (importers/concepts.py):
# one binary concept per node, or one categorical concept per level.
HIERARCHY_AS = ("nodes", "levels")
# What `import images --drop` leaves out (importers/images.py): flat images, identical repeats.
DROPPABLE = ("flat", "duplicates")
