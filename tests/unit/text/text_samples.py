"""Shared test data for the stoker.text tests."""

# Real English sentences (short, with punctuation, contractions, accents and one very long
# line), so token ids are compared on text with the usual WordPiece difficulties.
SENTENCES = [
    "There's nothing to tell! He's just some guy I work with!",
    "C'mon, you're going out with the guy! There's gotta be something wrong with him!",
    "All right Joey, be nice.  So does he have a hump? A hump and a hairpiece?",
    "Wait, does he eat chalk?",
    "Just, 'cause, I don't want her to go through what I went through with Carl- oh!",
    "Okay, everybody relax. This is not even a date.",
    "Sounds like a date to me.",
    "The café served crème brûlée, naïvely priced at €4.50 — a bargain in Zürich.",
    "unaffable antidisestablishmentarianism hyperparameterization",
    'In 1998, 3.14159 people said: "hello"; others said (goodbye)...',
    " ".join(["the quick brown fox jumps over the lazy dog"] * 40),
    "東京 is a city; 北京 too.",
]
