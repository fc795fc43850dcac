"""ConceptLens: which concepts have your vision models learned?"""

__version__ = "0.1.0"
