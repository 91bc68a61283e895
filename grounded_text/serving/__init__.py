"""Export and loading: the text and image towers as TF Hub SavedModels, their model cards,
and the one client (``TextEncoder``) that users and every evaluation path load them with."""
